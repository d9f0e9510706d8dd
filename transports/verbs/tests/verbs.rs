//! Verbs-specific behaviour beyond the generic contract: flow control
//! under a flood with a tiny window and rnr_retry 0, error completions,
//! the no-device and wrong-device messages.

mod common;

use std::time::{Duration, Instant};

use ovbench_conformance::connect_all;
use ovbench_core::RmaOp;
use ovbench_core::{Completion, CompletionStamps, LocalSlice, Msg, OpKind, Transport};
use ovbench_verbs::{DeviceList, VerbsOptions, VerbsTransport};

#[test]
fn missing_device_is_explained() {
    let names = DeviceList::new().expect("ibv_get_device_list").names();
    let wanted = if names.is_empty() {
        None
    } else {
        Some("no-such-device0".to_string())
    };
    let opts = VerbsOptions {
        device: wanted,
        ..VerbsOptions::default()
    };
    let err = match VerbsTransport::new(0, 2, opts) {
        Ok(_) => panic!("opening a missing device succeeded"),
        Err(e) => e.to_string(),
    };
    if names.is_empty() {
        assert!(err.contains("devices found: none"), "{err}");
        assert!(
            err.contains("modprobe rdma_rxe") && err.contains("rdma link add"),
            "{err}"
        );
    } else {
        assert!(err.contains("no-such-device0"), "{err}");
        for n in &names {
            assert!(err.contains(n.as_str()), "{err} does not list {n}");
        }
    }
}

fn pump_until(
    ts: &mut [Box<dyn Transport>],
    inbox: &mut [Vec<Completion>],
    what: &str,
    done: &mut dyn FnMut(&[Vec<Completion>]) -> bool,
) {
    let end = Instant::now() + Duration::from_secs(120);
    let mut v = Vec::new();
    while !done(inbox) {
        for (r, t) in ts.iter_mut().enumerate() {
            t.poll(&mut v, None)
                .unwrap_or_else(|e| panic!("rank {r} poll: {e}"));
            for c in v.drain(..) {
                if let Completion::Error { .. } = c {
                    panic!("rank {r} while waiting for {what}: {c:?}");
                }
                inbox[r].push(c);
            }
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
    }
}

/// 10,000 unexpected eager messages into a window of 4 receive buffers
/// with rnr_retry 0: any overrun would be an RNR NAK, i.e. a fatal error
/// completion. The receiver only polls after everything was posted.
#[test]
fn flood_with_rx_depth_4_and_rnr_retry_0() {
    if !common::have_device("flood") {
        return;
    }
    const N: u32 = 10_000;
    let opts = VerbsOptions {
        rx_depth: 4,
        tx_depth: 8,
        rnr_retry: 0,
        ..VerbsOptions::default()
    };
    let mut ts = common::make_with(2, &opts);
    connect_all(&mut ts).expect("connect");
    let region = ts[0].alloc(64).unwrap();
    for i in 0..N {
        ts[0]
            .region(LocalSlice::new(region, 0, 8), &mut |b| {
                b.copy_from_slice(&(i as u64 * 3).to_le_bytes())
            })
            .unwrap();
        let hdr = i.to_le_bytes();
        ts[0]
            .post_send(
                1,
                Msg::new(&hdr, Some(LocalSlice::new(region, 0, 8))),
                i as u64,
            )
            .unwrap();
    }
    let mut next = 0u32;
    let mut sends = 0u32;
    let mut v = Vec::new();
    let end = Instant::now() + Duration::from_secs(300);
    while next < N || sends < N {
        for r in 0..2 {
            ts[r].poll(&mut v, None).unwrap();
            for c in v.drain(..) {
                match c {
                    Completion::Recv { peer: 0, data } => {
                        assert_eq!(data.len(), 12);
                        let seq = u32::from_le_bytes(data[..4].try_into().unwrap());
                        let val = u64::from_le_bytes(data[4..].try_into().unwrap());
                        assert_eq!((seq, val), (next, next as u64 * 3), "order or payload");
                        next += 1;
                        ts[1].recycle(data);
                    }
                    Completion::Send { ctx } => {
                        assert_eq!(ctx, sends as u64, "send completions out of order");
                        sends += 1;
                    }
                    other => panic!("rank {r}: unexpected {other:?}"),
                }
            }
        }
        assert!(
            Instant::now() < end,
            "flood stalled at {next} received, {sends} sent"
        );
    }
    println!("flood: {N} messages through a window of 4 with rnr_retry 0");
}

/// An RDMA write through a wrong rkey ends in an error completion naming
/// the peer, the operation and the verbs status; later posts are refused.
#[test]
fn bad_rkey_is_an_error_completion() {
    if !common::have_device("bad_rkey") {
        return;
    }
    let mut ts = common::make_with(2, &VerbsOptions::default());
    connect_all(&mut ts).expect("connect");
    let dst = ts[1].alloc(4096).unwrap();
    let dmr_reg = ts[1].register(LocalSlice::new(dst, 0, 4096)).unwrap();
    let mut key = dmr_reg.key.clone();
    key.blob[0] ^= 0x5A;
    let src = ts[0].alloc(4096).unwrap();
    let smr_reg = ts[0].register(LocalSlice::new(src, 0, 4096)).unwrap();
    let smr = smr_reg.mr;
    ts[0]
        .post_rma(
            1,
            RmaOp::write(LocalSlice::new(src, 0, 64), smr, &key, 0),
            99,
        )
        .unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let mut v = Vec::new();
    let status = loop {
        ts[0].poll(&mut v, None).unwrap();
        ts[1].poll(&mut Vec::new(), None).unwrap();
        if let Some(c) = v.pop() {
            match c {
                Completion::Error {
                    ctx: Some(99),
                    peer: 1,
                    op: OpKind::Write,
                    status,
                } => break status,
                other => panic!("expected the write's error completion, got {other:?}"),
            }
        }
        assert!(
            Instant::now() < end,
            "no completion for a write through a bad key"
        );
    };
    assert!(
        status.contains("remote access error") || status.contains("status"),
        "{status}"
    );
    println!("bad rkey: {status}");
    let again = ts[0]
        .post_send(1, Msg::new(b"x", None), 1)
        .unwrap_err()
        .to_string();
    assert!(
        again.contains("rank 1") && again.contains("connection is down"),
        "{again}"
    );
}

/// Writes and reads at 64 KiB round-trip the data (RC write completion =
/// placed at the target), also with the MTU forced to 1024.
#[test]
fn write_then_read_back_64k() {
    if !common::have_device("write_read") {
        return;
    }
    let opts = VerbsOptions {
        mtu: Some(1024),
        ..VerbsOptions::default()
    };
    let mut ts = common::make_with(2, &opts);
    connect_all(&mut ts).expect("connect");
    const L: usize = 65536;
    let dst = ts[1].alloc(L).unwrap();
    let dmr_reg = ts[1].register(LocalSlice::new(dst, 0, L)).unwrap();
    let key = dmr_reg.key.clone();
    let src = ts[0].alloc(2 * L).unwrap();
    let smr_reg = ts[0].register(LocalSlice::new(src, 0, 2 * L)).unwrap();
    let smr = smr_reg.mr;
    ts[0]
        .region(LocalSlice::new(src, 0, L), &mut |b| {
            for (i, x) in b.iter_mut().enumerate() {
                *x = (i * 7 % 251) as u8;
            }
        })
        .unwrap();
    ts[0]
        .post_rma(1, RmaOp::write(LocalSlice::new(src, 0, L), smr, &key, 0), 1)
        .unwrap();
    let mut inbox = vec![Vec::new(), Vec::new()];
    pump_until(&mut ts, &mut inbox, "the write", &mut |ib| {
        ib[0]
            .iter()
            .any(|c| matches!(c, Completion::Write { ctx: 1 }))
    });
    let mut same = false;
    ts[1]
        .region(LocalSlice::new(dst, 0, L), &mut |b| {
            same = b.iter().enumerate().all(|(i, &x)| x == (i * 7 % 251) as u8)
        })
        .unwrap();
    assert!(same, "the write's data was not at the target on completion");
    ts[0]
        .post_rma(1, RmaOp::read(LocalSlice::new(src, L, L), smr, &key, 0), 2)
        .unwrap();
    pump_until(&mut ts, &mut inbox, "the read", &mut |ib| {
        ib[0]
            .iter()
            .any(|c| matches!(c, Completion::Read { ctx: 2 }))
    });
    ts[0]
        .region(LocalSlice::new(src, L, L), &mut |b| {
            same = b.iter().enumerate().all(|(i, &x)| x == (i * 7 % 251) as u8)
        })
        .unwrap();
    assert!(same, "the read returned different bytes");
    let info = ts[0].info();
    println!("write/read 64 KiB ok on {} ({:?})", info.device, info.extra);
}

/// Completion timestamps: where the device stamps completions (a NIC clock
/// was calibrated) the last completion has a host time close to now; where
/// it does not (rxe) there is none and the host clock is the fallback.
#[test]
fn completion_timestamps_or_host_fallback() {
    if !common::have_device("timestamps") {
        return;
    }
    let mk = |r| VerbsTransport::new(r, 2, VerbsOptions::default()).expect("new");
    let (mut a, mut b) = (mk(0), mk(1));
    let addrs = vec![a.address(), b.address()];
    a.connect(&addrs).expect("connect");
    b.connect(&addrs).expect("connect");
    assert_eq!(a.last_completion_time(), None, "no completion yet");
    a.post_send(1, Msg::new(b"tick", None), 5).unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let mut v = Vec::new();
    while !v.iter().any(|c| matches!(c, Completion::Send { ctx: 5 })) {
        a.poll(&mut v, None).unwrap();
        b.poll(&mut Vec::new(), None).unwrap();
        assert!(Instant::now() < end, "the send never completed");
    }
    let info = a.info();
    let stamps = info.caps.completion_stamps;
    assert!(
        !info.extra.iter().any(|(k, _)| k == "completion_timestamps"),
        "the stamps are a capability now, not an extra"
    );
    match a.nic_clock() {
        Some(_) => {
            assert_eq!(stamps, CompletionStamps::Nic);
            let t = a.last_completion_time().expect("a stamped completion");
            let now = Instant::now();
            let d = ovbench_core::clock::ns_since(t, now);
            assert!(
                (0..5_000_000_000).contains(&d),
                "NIC time {d} ns before host time"
            );
        }
        None => {
            assert_eq!(stamps, CompletionStamps::Host);
            assert_eq!(a.last_completion_time(), None);
            println!(
                "timestamps: {} offers none, the host clock is used",
                a.info().device
            );
        }
    }
}
