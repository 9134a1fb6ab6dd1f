package main

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/dorisarm/dorisarm/internal/matrix"
)

func main() {
	var before, after runtime.MemStats
	var ru0, ru1 syscall.Rusage
	runtime.ReadMemStats(&before)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	_, err := matrix.Load("embedded:matrix.yaml")
	d := time.Since(start)
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	runtime.ReadMemStats(&after)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("COLD", d.Nanoseconds(), after.Mallocs-before.Mallocs, ru1.Minflt-ru0.Minflt)
}
