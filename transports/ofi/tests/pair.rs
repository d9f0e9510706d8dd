//! Two libfabric ranks in one process, driven by alternating polls, over
//! tcp;ofi_rxm, shm and sockets: messages, ordering, one-sided visibility,
//! key checks and the native tagged path with wildcards.

use ovbench_conformance::pair::{self, one_at_a_time};
use ovbench_core::{Progress, RmaProgress, Transport};
use ovbench_ofi::{OfiOptions, OfiTransport};

/// Two connected ranks over provider `prov`.
fn open(prov: &str, progress: Progress) -> [OfiTransport; 2] {
    open_dc(prov, progress, None)
}

/// Two connected ranks, asking for delivery-complete writes as given.
fn open_dc(prov: &str, progress: Progress, delivery_complete: Option<bool>) -> [OfiTransport; 2] {
    let mk = |r| {
        OfiTransport::new(
            r,
            2,
            OfiOptions {
                provider: prov.into(),
                node: None,
                progress,
                delivery_complete,
            },
        )
        .unwrap_or_else(|e| panic!("libfabric {prov}: {e}"))
    };
    pair::connect([mk(0), mk(1)])
}

const TCP: &str = "tcp;ofi_rxm";

/// Which scenarios run over which provider.
#[test]
fn scenarios_over_each_provider() {
    use pair::Scenario::{Messages, Rma, Tagged};
    pair::run_table(
        &[
            (
                Messages(ovbench_ofi::EAGER_BUF_SIZE),
                &[TCP, "shm", "sockets"],
            ),
            (Rma, &[TCP, "shm"]),
            (Tagged, &[TCP, "shm", "sockets"]),
        ],
        |prov| open(prov, Progress::Poll),
    );
}

/// Writes without delivery complete: a read after each write fences it.
#[test]
fn rma_with_read_after_write_fence() {
    for prov in [TCP, "shm"] {
        let _g = one_at_a_time();
        let t = open_dc(prov, Progress::Poll, Some(false));
        assert!(
            t[0].write_visibility()
                .starts_with("read-after-write fence"),
            "{prov}"
        );
        pair::rma(t);
    }
}

#[test]
fn info_names_provider_and_visibility() {
    let _g = one_at_a_time();
    for prov in [TCP, "shm"] {
        let t = open(prov, Progress::Poll);
        let info = t[0].info();
        eprintln!("{prov}: {info:?} {:?}", t[0].info().caps);
        assert!(info.library.starts_with("libfabric 1."), "{info:?}");
        assert!(
            info.extra
                .iter()
                .any(|(k, v)| k == "provider" && prov.contains(v.split(';').next().unwrap())),
            "{info:?}"
        );
        let want = if prov == "shm" {
            RmaProgress::Offloaded
        } else {
            RmaProgress::TargetProgress
        };
        assert_eq!(t[0].info().caps.rma_progress, want, "{prov}");
        // Observed on libfabric 1.17: only shm holds a delivery-complete
        // tagged send until the match.
        assert_eq!(t[0].info().caps.native_sync_send, prov == "shm", "{prov}");
    }
    let e = OfiTransport::new(
        0,
        2,
        OfiOptions {
            provider: "no-such-provider".into(),
            ..OfiOptions::default()
        },
    );
    let msg = e.err().expect("a bogus provider must fail").to_string();
    assert!(msg.contains("fi_info -l"), "{msg}");
}

/// Who serves RMA while the target computes (never polls), against the
/// caps' claim: over tcp;ofi_rxm the target's progress (or its progress
/// thread); over shm the initiator alone by cross-memory attach — except
/// that a delivery-complete write waits for the target's acknowledgement
/// (the fence is shm's default for that reason).
#[test]
fn who_serves_rma_while_the_target_computes() {
    let _g = one_at_a_time();
    use RmaProgress::{Offloaded, TargetProgress};
    for (prov, progress, dc, claim, read_alone, write_alone) in [
        (TCP, Progress::Poll, None, TargetProgress, false, false),
        (TCP, Progress::Thread, None, TargetProgress, true, true),
        // sockets progresses on its own threads (FI_PROGRESS_AUTO).
        (
            "sockets",
            Progress::Thread,
            None,
            TargetProgress,
            true,
            true,
        ),
        ("shm", Progress::Poll, None, Offloaded, true, true),
        (
            "shm",
            Progress::Poll,
            Some(true),
            TargetProgress,
            true,
            false,
        ),
    ] {
        for size in [8usize, 4096, 1 << 20] {
            let mut t = open_dc(prov, progress, dc);
            // sockets progresses on its own threads whatever was asked.
            let want = if prov == "sockets" {
                Progress::Thread
            } else {
                progress
            };
            assert_eq!(t[1].info().caps.progress, want, "{prov}");
            assert_eq!(t[0].info().caps.rma_progress, claim, "{prov} {dc:?}");
            pair::rma_while_target_computes(
                &mut t,
                size,
                (read_alone, write_alone),
                &format!("{prov} {progress} dc {dc:?}"),
            );
        }
    }
}

/// libfabric learns a universe size before its first call: the user's
/// `FI_UNIVERSE_SIZE`, else the rank count (at least 16) set by ovbench;
/// the header says which.
#[test]
fn universe_size_is_set_and_reported() {
    let _g = one_at_a_time();
    let user = std::env::var("FI_UNIVERSE_SIZE").ok();
    let t = open(TCP, Progress::Poll);
    let info = t[0].info();
    let line = info
        .extra
        .iter()
        .find(|(k, _)| k == "universe_size")
        .map(|(_, v)| v.clone())
        .expect("a universe_size line in the transport info");
    let now =
        std::env::var("FI_UNIVERSE_SIZE").expect("FI_UNIVERSE_SIZE set once a transport opened");
    assert!(line.starts_with(&now), "{line} vs FI_UNIVERSE_SIZE={now}");
    match user {
        // Another test of this binary may have opened libfabric first.
        Some(u) => assert_eq!(u, now),
        None => {
            assert!(now.parse::<usize>().unwrap() >= 16);
            assert!(line.contains("ovbench set it"), "{line}");
        }
    }
}
