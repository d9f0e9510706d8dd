//! Two UCX ranks in one process, driven by alternating polls, over tcp,
//! posix and shm: messages, ordering, one-sided visibility, key checks and
//! the native tag path with wildcards.

use ovbench_conformance::pair::{self, one_at_a_time};
use ovbench_core::{Progress, RmaProgress, Transport};
use ovbench_ucx::{UcxOptions, UcxTransport};

/// Two connected ranks over UCX transport(s) `tls`.
fn open(tls: &str, progress: Progress) -> [UcxTransport; 2] {
    let mk = |r| {
        UcxTransport::new(
            r,
            2,
            UcxOptions {
                tls: Some(tls.into()),
                net_devices: None,
                progress,
                ..UcxOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("UCX over {tls}: {e}"))
    };
    pair::connect([mk(0), mk(1)])
}

/// Which scenarios run over which transports and progress.
#[test]
fn scenarios_over_each_transport() {
    use pair::Scenario::{Messages, Rma, Tagged};
    use Progress::{Poll, Thread};
    pair::run_table(
        &[
            (
                Messages(ovbench_ucx::EAGER_BUF_SIZE),
                &[("tcp", Poll), ("posix", Poll)],
            ),
            (Rma, &[("tcp", Poll), ("posix", Poll), ("shm", Poll)]),
            (Tagged, &[("tcp", Poll), ("posix", Poll), ("tcp", Thread)]),
        ],
        |(tls, progress)| open(tls, progress),
    );
}

#[test]
fn rma_progress_follows_the_lanes() {
    let _g = one_at_a_time();
    for (tls, want) in [
        ("tcp", RmaProgress::TargetProgress),
        ("posix", RmaProgress::TargetProgress),
        ("shm", RmaProgress::TargetProgress),
    ] {
        let t = open(tls, Progress::Poll);
        let p = t[0].rma_path();
        eprintln!("{tls}: {p:?}");
        assert_eq!(t[0].info().caps.rma_progress, want, "{tls}: {p:?}");
        let info = t[0].info();
        assert!(info.library.starts_with("UCX "), "{info:?}");
        assert!(info
            .extra
            .iter()
            .any(|(k, v)| k == "UCX_TLS" && v.contains("self")));
    }
}

/// The caps' RMA-progress axis, observed: a read or write whose target
/// never polls does not complete — over tcp (software RMA) nor over shm
/// (UCX 1.13 serves it through the target even with a CMA lane), at any
/// size — unless the target has a progress thread.
#[test]
fn who_serves_rma_while_the_target_computes() {
    let _g = one_at_a_time();
    for (tls, progress, served_alone) in [
        ("tcp", Progress::Poll, false),
        ("tcp", Progress::Thread, true),
        ("shm", Progress::Poll, false),
        ("shm", Progress::Thread, true),
    ] {
        for size in [4096usize, 1 << 20] {
            let mut t = open(tls, progress);
            assert_eq!(t[0].info().caps.rma_progress, RmaProgress::TargetProgress);
            pair::rma_while_target_computes(
                &mut t,
                size,
                (served_alone, served_alone),
                &format!("{tls} {progress}"),
            );
        }
    }
}

/// A transport name UCX does not know is refused with what to do.
#[test]
fn unknown_transport_is_explained() {
    let _g = one_at_a_time();
    let e = UcxTransport::new(
        0,
        2,
        UcxOptions {
            tls: Some("no_such_tl".into()),
            net_devices: None,
            progress: Progress::Poll,
            ..UcxOptions::default()
        },
    );
    let msg = e
        .err()
        .expect("an unknown UCX transport must be refused")
        .to_string();
    assert!(msg.contains("ucx_info -d"), "{msg}");
    assert!(msg.contains("no_such_tl"), "{msg}");
}
