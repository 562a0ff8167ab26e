package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// cpuProfileEnv names a file to write a CPU profile of the whole command
// to, for diagnosing a host's session (the bench sets it with
// --cpuprofile); unset, nothing is profiled.
const cpuProfileEnv = "WSCTL_CPUPROFILE"

// memProfileEnv names a file to write an allocation profile of the whole
// command to when it ends; unset, none is written.
const memProfileEnv = "WSCTL_MEMPROFILE"

func main() {
	// Read before Notify takes the signals: one ignored when wsctl started
	// (a background job of a shell script) is ignored again once stop()
	// lets go of it.
	ignored := signal.Ignored(os.Interrupt) || signal.Ignored(syscall.SIGTERM)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var again chan os.Signal
	if ignored {
		again = make(chan os.Signal, 2)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	}
	// The first interrupt asks the command to stop, letting what is in
	// flight finish; a second one ends wsctl at once, as the signal's
	// default does (the store keeps what was committed, as after a crash),
	// or, where that default is to ignore it, with the status of an
	// interrupt.
	go func() {
		<-ctx.Done()
		stop()
		if again != nil {
			<-again // the first, which ended ctx
			<-again
			os.Exit(130)
		}
	}()
	stopProfile, stopHeapPeak := startProfile(), startHeapPeak()
	code := execute(ctx, newApp(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stopHeapPeak()
	stopProfile()
	writeMemProfile()
	stop()
	os.Exit(code)
}

// startProfile starts the CPU profile cpuProfileEnv asks for and returns
// what ends it.
func startProfile() func() {
	path := os.Getenv(cpuProfileEnv)
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "wsctl: %s: %v\n", cpuProfileEnv, err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "wsctl: %s: %v\n", cpuProfileEnv, err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// writeMemProfile writes the allocation profile memProfileEnv asks for.
func writeMemProfile() {
	path := os.Getenv(memProfileEnv)
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		return
	}
	defer f.Close()
	_ = pprof.Lookup("allocs").WriteTo(f, 0)
}
