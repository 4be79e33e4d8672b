package main

import "strings"

// datasetFlags collects repeated --dataset name=URL (or URL) values.
type datasetFlags []string

func (d *datasetFlags) String() string     { return strings.Join(*d, ",") }
func (d *datasetFlags) Set(v string) error { *d = append(*d, v); return nil }
