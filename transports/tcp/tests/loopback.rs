//! Operations addressed to the own rank complete without a socket and
//! pass the same key checks as a peer's.

use ovbench_core::{Completion, LocalSlice, Msg, OpKind, RmaOp, Transport};
use ovbench_tcp::{TcpOptions, TcpTransport};

fn single() -> TcpTransport {
    let mut t = TcpTransport::new(0, 1, TcpOptions::default()).unwrap();
    let addrs = vec![t.address()];
    t.connect(&addrs).unwrap();
    t
}

fn drain(t: &mut TcpTransport) -> Vec<Completion> {
    let mut out = Vec::new();
    t.poll(&mut out, None).unwrap();
    out
}

#[test]
fn send_to_self_arrives_at_once() {
    let mut t = single();
    let r = t.alloc(16).unwrap();
    let p = LocalSlice::new(r, 0, 3);
    t.region(p, &mut |b| b.copy_from_slice(b"abc")).unwrap();
    t.post_send(0, Msg::new(b"hdr:", Some(p)), 7).unwrap();
    let out = drain(&mut t);
    assert!(matches!(out[0], Completion::Send { ctx: 7 }), "{out:?}");
    match &out[1] {
        Completion::Recv { peer: 0, data } => assert_eq!(data, b"hdr:abc"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn write_and_read_on_own_memory_check_the_key() {
    let mut t = single();
    let r = t.alloc(256).unwrap();
    t.region(LocalSlice::new(r, 0, 256), &mut |b| {
        for (i, x) in b.iter_mut().enumerate() {
            *x = i as u8;
        }
    })
    .unwrap();
    let mr_reg = t.register(LocalSlice::new(r, 0, 256)).unwrap();
    let mr = mr_reg.mr;
    let key = mr_reg.key.clone();
    // Write bytes 0..16 over 100..116, then read 100..116 into 200..216.
    t.post_rma(0, RmaOp::write(LocalSlice::new(r, 0, 16), mr, &key, 100), 1)
        .unwrap();
    t.post_rma(
        0,
        RmaOp::read(LocalSlice::new(r, 200, 16), mr, &key, 100),
        2,
    )
    .unwrap();
    let out = drain(&mut t);
    assert!(
        matches!(
            out[..],
            [Completion::Write { ctx: 1 }, Completion::Read { ctx: 2 }]
        ),
        "{out:?}"
    );
    let mut got = Vec::new();
    t.region(LocalSlice::new(r, 200, 16), &mut |b| {
        got.extend_from_slice(b)
    })
    .unwrap();
    assert_eq!(got, (0..16).collect::<Vec<u8>>());

    let mut forged = key.clone();
    forged.blob[5] ^= 0x10;
    t.post_rma(
        0,
        RmaOp::write(LocalSlice::new(r, 0, 16), mr, &forged, 0),
        3,
    )
    .unwrap();
    let out = drain(&mut t);
    assert!(
        matches!(&out[..], [Completion::Error { ctx: Some(3), peer: 0, op: OpKind::Write, status }] if status.contains("check word")),
        "{out:?}"
    );
    let mut first = Vec::new();
    t.region(LocalSlice::new(r, 0, 16), &mut |b| {
        first.extend_from_slice(b)
    })
    .unwrap();
    assert_eq!(
        first,
        (0..16).collect::<Vec<u8>>(),
        "a refused write changed memory"
    );
}
