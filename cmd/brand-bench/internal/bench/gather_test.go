package bench

import (
	"io"
	"math/rand/v2"
	"net"
	"testing"
)

// BenchmarkLoopbackGather sends batches of 256 slices of 10 KiB over a
// loopback TCP connection three ways: one contiguous write of 2.6 MB, as
// the memory server of limit (b′) does; one writev of the 256 slices taken
// from random places in 128 MiB, as Brand's gateway sends a shuffled batch
// from its cache; and the same slices copied into one buffer first, which
// the gateway does only where it cannot hand net/http a connection (TLS,
// HTTP/2). It reports this process's CPU time (sender and receiver are
// both in it) per GB sent: what gathering a shuffled batch costs beside
// sending contiguous bytes, in the kernel and out of it.
func BenchmarkLoopbackGather(b *testing.B) {
	const slices, size = 256, 10 << 10
	mem := make([]byte, 128<<20)
	for i := range mem {
		mem[i] = byte(i)
	}
	for _, mode := range []string{"contiguous", "writev", "copy"} {
		b.Run(mode, func(b *testing.B) {
			send, done := loopbackPair(b)
			r := rand.New(rand.NewPCG(1, 2))
			start := func(n int) int { return r.IntN(len(mem)-n) &^ 511 }
			bufs := make(net.Buffers, slices)
			joined := make([]byte, slices*size)
			b.SetBytes(slices * size)
			c0 := processCPU(0)
			for b.Loop() {
				var err error
				switch mode {
				case "contiguous":
					off := start(slices * size)
					_, err = send.Write(mem[off : off+slices*size])
				case "writev":
					for i := range bufs {
						off := start(size)
						bufs[i] = mem[off : off+size]
					}
					nb := bufs // WriteTo consumes its receiver
					_, err = nb.WriteTo(send)
				case "copy":
					for i := range slices {
						off := start(size)
						copy(joined[i*size:], mem[off:off+size])
					}
					_, err = send.Write(joined)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			send.Close()
			<-done
			if cpu := processCPU(0) - c0; cpu > 0 { // measured on Linux only
				b.ReportMetric(cpu.Seconds()/(float64(b.N)*slices*size/1e9), "cpu-s/GB")
			}
		})
	}
}

// loopbackPair connects to a loopback listener whose one connection is
// read and discarded until the sender closes; done is closed then.
func loopbackPair(b *testing.B) (send net.Conn, done <-chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.CopyBuffer(io.Discard, c, make([]byte, 4<<20))
	}()
	send, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	return send, ch
}
