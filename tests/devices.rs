//! `ovbench devices` and `--version` in whatever build runs the test: a
//! default build (no fabric library) names the missing transports with
//! the feature and packages to add; a build with UCX and libfabric lists
//! what their own queries find (UCX's shared-memory transports and
//! libfabric's shm provider exist on every machine). CI runs this file in
//! both builds (ci/test: tool-tests with ucx,ofi; devices-default).

mod common;

use std::time::Duration;

use common::ovbench;

const LIMIT: Duration = Duration::from_secs(60);

fn section<'a>(out: &'a str, name: &str) -> &'a str {
    let start = out
        .lines()
        .position(|l| l.starts_with(&format!("{name:<6} ")))
        .unwrap_or_else(|| panic!("no {name} section:\n{out}"));
    let lines: Vec<&str> = out.lines().collect();
    let end = lines[start + 1..]
        .iter()
        .position(|l| !l.starts_with("       "))
        .map_or(lines.len(), |e| start + 1 + e);
    let from = out.find(lines[start]).unwrap();
    let to = if end < lines.len() {
        out.find(lines[end]).unwrap()
    } else {
        out.len()
    };
    &out[from..to]
}

#[test]
fn devices_lists_every_transport_as_built() {
    let r = ovbench(&["devices"], LIMIT).expect_ok();
    let out = &r.stdout;
    assert!(section(out, "tcp").contains("compiled in"), "{out}");
    assert!(section(out, "sim").contains("compiled in"), "{out}");
    // Each library's section: what its own query finds when built in,
    // else the feature and the package to add.
    let fabrics: [(&str, bool, &[&str], &[&str]); 2] = [
        (
            "ucx",
            cfg!(feature = "ucx"),
            &["compiled in, UCX 1.", "posix: memory (shm)"],
            &["not compiled in", "--features ucx", "libucx-dev"],
        ),
        (
            "ofi",
            cfg!(feature = "ofi"),
            &["compiled in, libfabric 1.", "shm: endpoints rdm"],
            &["--features ofi", "libfabric-dev"],
        ),
    ];
    for (name, built, when_built, when_not) in fabrics {
        let says = section(out, name);
        for want in if built { when_built } else { when_not } {
            assert!(says.contains(want), "{name} lacks `{want}`:\n{says}");
        }
    }
    let verbs = section(out, "verbs");
    if cfg!(feature = "verbs") {
        // A device with its ports, or the hint to make one.
        assert!(
            verbs.contains("port 1:") || verbs.contains("rdma_rxe"),
            "{verbs}"
        );
    } else {
        assert!(verbs.contains("--features verbs"), "{verbs}");
    }
    assert!(section(out, "mpi").contains("hint:"), "{out}");
    assert!(out.contains("mpirun: ") && out.contains("srun: ") && out.contains("PMIx: "));
}

#[test]
fn version_names_the_compiled_in_transports() {
    let r = ovbench(&["--version"], LIMIT).expect_ok();
    let mut want = vec!["tcp", "sim"];
    for (f, on) in [
        ("verbs", cfg!(feature = "verbs")),
        ("ucx", cfg!(feature = "ucx")),
        ("ofi", cfg!(feature = "ofi")),
    ] {
        if on {
            want.push(f);
        }
    }
    assert!(
        r.stdout
            .contains(&format!("(transports: {})", want.join(", "))),
        "{}",
        r.stdout
    );
}
