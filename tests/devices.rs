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
    let ucx = section(out, "ucx");
    if cfg!(feature = "ucx") {
        assert!(ucx.contains("compiled in, UCX 1."), "{ucx}");
        assert!(ucx.contains("posix: memory (shm)"), "{ucx}");
    } else {
        assert!(
            ucx.contains("not compiled in") && ucx.contains("--features ucx"),
            "{ucx}"
        );
        assert!(ucx.contains("libucx-dev"), "{ucx}");
    }
    let ofi = section(out, "ofi");
    if cfg!(feature = "ofi") {
        assert!(ofi.contains("compiled in, libfabric 1."), "{ofi}");
        assert!(ofi.contains("shm: endpoints rdm"), "{ofi}");
    } else {
        assert!(
            ofi.contains("--features ofi") && ofi.contains("libfabric-dev"),
            "{ofi}"
        );
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
