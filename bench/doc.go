// Command bench runs reproducible checkpoint-heavy workloads against
// wsstore and two baselines — a directory copy per checkpoint and a shadow
// git repository — and reports checkpoint and rollback latency, wall time,
// bytes on disk and peak RSS, with the ratios and the targets they are
// held to.
//
//	go run ./bench                 # full scale; several minutes
//	go run ./bench --quick         # smoke run, well under a minute
//	go run ./bench --workloads chat,project --systems wsstore,git
//
// Each workload × system runs in a child process (the bench binary run
// again with a hidden flag), so its peak RSS is its own. The report is
// Markdown on stdout and JSON in --out.
//
// The wsctl system drives a `wsctl batch` child built from this tree, or
// the binary WSBENCH_WSCTL names, to compare two builds. That child
// always writes a CPU profile (WSCTL_CPUPROFILE); the case's result splits
// it into phases (the requests, the re-encoding drained at close, the
// background runner) and what each ran (SQLite, zstd, system calls,
// allocation), and a speed target the case misses names its largest
// shares as its bottleneck. It also reports its peak heap
// (WSCTL_HEAPPEAK), which the heap target holds under 64 MiB.
// --cpuprofile keeps the profile in a file of its own, and
// WSCTL_MEMPROFILE gives a command's allocation profile:
//
//	go build -o /tmp/wsctl-a ./cmd/wsctl
//	WSBENCH_WSCTL=/tmp/wsctl-a go run ./bench --workloads chat --systems wsctl --cpuprofile /tmp/a.prof
package main
