//! The examples at the end of every subcommand's `--help`, in one place
//! (the flag tables of docs/cli.md name the same spellings).

#![deny(clippy::arithmetic_side_effects)]

/// `(subcommand, examples)`; each example one line, the command and
/// what it shows.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "latency",
        "  ovbench latency                                   # tcp, 2 ranks, sizes 0:4M\n  ovbench latency --sizes 8,64K,1M --iters 5000 --json lat.json\n  ovbench latency --transport ucx --ucx-tls posix --proto native,eager,rdma-read,raw --sizes 8,64K,1M\n  ovbench latency --transport sim --sim L=2us,os=300ns   # the LogGP model",
    ),
    (
        "bw",
        "  ovbench bw --sizes 1K:4M --window 64\n  ovbench bw --pairs 2 --np 4                      # two pairs at once\n  ovbench bw --proto rdma-write,rdma-read --json bw.json",
    ),
    (
        "bibw",
        "  ovbench bibw --sizes 64K:4M\n  ovbench bibw --transport ofi --provider shm",
    ),
    (
        "msgrate",
        "  ovbench msgrate --sizes 8:4K --window 128\n  ovbench msgrate --pairs 2 --np 4",
    ),
    (
        "overhead",
        "  ovbench overhead --sizes 8:64K --json send.json\n  ovbench overhead --recv --sizes 8:64K --json recv.json\n  ovbench plot send.json recv.json -o overhead.svg",
    ),
    (
        "logp",
        "  ovbench logp --sizes 0:256K\n  ovbench logp --flood --send-mode isend --json logp.json",
    ),
    (
        "bcast",
        "  ovbench bcast --np 8 --method all\n  ovbench bcast --transport sim --np 4,8,16 --sizes 64K   # sweep the rank count",
    ),
    (
        "commtest",
        "  ovbench commtest --total 1M --iters 5\n  ovbench commtest --distance 2 --np 4\n  ovbench commtest --start sync --protocol 0,0 --protocol 1,4",
    ),
    (
        "overlap",
        "  ovbench overlap --sizes 10K,1M\n  ovbench overlap --proto raw --write-xfer-table x.tbl && ovbench overlap --xfer-table x.tbl",
    ),
];

/// The examples of `sub`, as an `after_help` text.
pub fn after_help(sub: &str) -> Option<String> {
    EXAMPLES
        .iter()
        .find(|(s, _)| *s == sub)
        .map(|(_, e)| format!("Examples:\n{e}"))
}
