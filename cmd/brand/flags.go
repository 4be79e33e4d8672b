package main

import (
	"strconv"
	"strings"
)

// datasetFlags collects repeated --dataset name=URL (or URL) values.
type datasetFlags []string

func (d *datasetFlags) String() string     { return strings.Join(*d, ",") }
func (d *datasetFlags) Set(v string) error { *d = append(*d, v); return nil }

// optionalBool is a boolean flag that tells unset from set: --checksums
// (true), --checksums=false (refused), and neither (the format's
// default).
type optionalBool struct{ set, v bool }

func (b *optionalBool) String() string {
	if b == nil || !b.set {
		return "the format's default"
	}
	return strconv.FormatBool(b.v)
}

func (b *optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.set, b.v = true, v
	return nil
}

// IsBoolFlag lets the flag stand alone (--checksums).
func (b *optionalBool) IsBoolFlag() bool { return true }
