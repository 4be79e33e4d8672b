// Package s3face is Brand's S3 face: the datasets a gateway serves as
// read-only buckets of their samples' files, and read-through buckets of a
// store's objects served as they are, for S3 clients that do not change
// (boto3, the AWS CLI, minio-go, presigned URLs). docs/http-api.md "S3
// face" is its reference; docs/architecture.md "The S3 face" its design.
//
// It adds no data path. A dataset file's GET reads its sample through the
// one reader a batch is read by (internal/batch/reader: the cache and its
// policy, the disk tier, a cluster's owners), and a read-through object's
// GET reads its blocks through the same reader (Reader.ReadEntries) from
// the same cache, where they are entries of their own kind
// (chunkcache.Object) that a loader of their own fills (ReadThrough): the
// dataset loader and the disk tier never see them. Both are written by
// the one writer of responses that carry samples (internal/batch/respond),
// under its write deadlines, a large object streamed block by block
// (respond.Payload.Next). One step (s3proto.Prepare) answers the
// preconditions and the Range of both kinds.
//
// The face is built on small interfaces of its own (Deps): the dataset
// versions it serves and the one a bucket reads now, the reader, the
// writer, the preloads (internal/cache/preload), where a chunk is read (the
// cluster), and readiness. It starts no goroutine: its read-ahead — the
// next chunks of a dataset read in chunk order, the next blocks of an
// object being read — is preloads, which run on a part of the gateway's
// stopper and end with it. Errors are mapped to statuses by internal/server/httperr, as
// the gateway's are, and then named with S3's codes.
//
// # Datasets served in place
//
// A dataset served in place (package format) has no member table: its
// members exist once a chunk is decoded. A GET or HEAD of key.ext reads
// the sample through the reader and finds the member in its decoded tar
// bytes (a HEAD loads the chunk too); the first listing of a dataset
// version reads every chunk through the reader, listChunks at a time, a
// chunk larger than listReadBytes in parts, and keeps each member's
// extension, offset, size and CRC32C (decodedMembers: 16 bytes a member,
// 4 a sample) with the version, as a tar dataset's member table is kept.
// That listing answers when every chunk is read: later ones, and
// concurrent ones, which wait for it, are from memory. Its reads continue
// when its client goes away, for the next listing.
//
// # Staleness
//
// A dataset file is named by its chunk's ETag, which the index records:
// a re-pack is a new index version, and a chunk changed under its index
// fails its CRC32Cs. A read-through object is read under the version the
// store reports when the GET begins, which is part of every cache key of
// its blocks, and every block is read pinned to it: an S3 store's ETag; a
// local directory's version of the file (s3backend.Local.Live), which
// changes with every write, a same-size rewrite of the middle included,
// and which each read checks before and after it reads. A GET whose
// object changes while it is read is cut short, never completed with
// another version's bytes. A local file changed within the settle time
// (s3backend.DefaultSettle) of its version being taken is read afresh for
// each GET: another write within the same timestamp tick would keep its
// version.
//
// # Bounds
//
// The face takes no request body: a write, and a request that is not
// signed, are refused before their body is read and their connection
// closed, and a read that declares a body is refused unread
// (internal/server/reqbody). Keys longer than S3's 1,024 bytes are refused
// (KeyTooLongError) before any store is asked; a read-through bucket's listings are kept 5 s per
// prefix, at most 64 prefixes a bucket; a read-through object is cached
// whole up to Config.WholeObject and in blocks of Config.Block beyond,
// each at most an eighth of the cache; a block's load is bounded by the
// fetch timeout; at most Config.ReadAhead chunks or blocks are preloaded
// ahead of a GET, within the gateway's bound on preloads.
package s3face
