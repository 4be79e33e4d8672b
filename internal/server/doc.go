// Package server is the parent of what a node's process holds for every
// part of it, whatever the request:
//
//	memory     the one memory manager: the budget, its shares, buffer pools
//	stopper    the one owner of every goroutine that outlives a request
//	admit      bounds on how much of something is held at once
//	httperr    every error mapped to the HTTP status a client sees
//	reqbody    request bodies' sizes and read deadlines, per route
//	logbuffer  the log's lines gathered into fewer writes
package server
