// Package tokenize encodes text to SentencePiece token IDs.
package tokenize
