//! `ovbench logp --transport sim` against closed forms of the sim's LogGP
//! rules, for every send/receive mode pair, over parameter sets drawn at
//! random (tests/sim_truth). The truth is written out below from the
//! simulator's rules (docs/architecture.md § The simulator); nothing
//! comes from the method's code.
//!
//! The rules used (progress=poll, no jitter, m = 0 so m·G = 0):
//! a posted message costs its sender o_s and leaves when the NIC is free
//! (injections at least g apart); it is at the peer L later; consuming it
//! costs the receiver o_r inside a library call; completions are free; a
//! standard (eager) send or isend is done once posted; a synchronous send
//! is done when the receiver's match acknowledgement (a message of its
//! own, posted as the receive matches) has been consumed.
//!
//! With R = 2(o_s + L + o_r) and G0 = max(o_s, g, o_r), and R ≥ g (the NIC
//! never holds back a ping-pong's message):
//!
//! * send, isend: os(0) = o_s (the call, or the isend call, is the post);
//!   or(0) = o_r (the reply waits in the inbox through the spin; the
//!   receive, or irecv's wait, consumes it); RTT(0) = R. A train of n
//!   messages leaves the sender every max(o_s, g) and is consumed every
//!   max(that, o_r); the acknowledgement follows the last: total = R +
//!   (n − 1)·G0, so g(0) = (total − RTT(0))/(n − 1) = G0, and
//!   L_logp = R/2 − G0.
//! * ssend: the call is a round trip of the message and its match
//!   acknowledgement: os(0) = R. The mirror's reply is posted max(o_s, g)
//!   after the acknowledgement, so it is consumed max(o_r, o_s, g) after
//!   the call returns: RTT(0) = R + G0. A train of ssends is a chain of
//!   such round trips, R apart, and its final reply comes G0 after the
//!   last returns: total = n·R + G0, so g(0) = (total − RTT(0))/(n − 1)
//!   = R; or(0) = o_r as above; L_logp = (R + G0)/2 − R = (G0 − R)/2,
//!   never positive: unknown (null, with a reason, and the row flagged).
//!
//! Where g > R, the NIC spaces a ping-pong's messages g apart: RTT(0) = g
//! and a train's gap is g, so L_logp = g/2 − g < 0 (unknown) in every
//! mode; os(0) and or(0) keep their forms for send and isend, and or(0)
//! for ssend (its os(0) and g(0) are then not checked here).

mod sim_truth;

use sim_truth::{close, none_failed, num, over_draws, rows, sim_json, LogGp};

const SENDS: [&str; 3] = ["send", "isend", "ssend"];
const RECVS: [&str; 2] = ["recv", "irecv"];

/// Closed forms for one mode pair (ns); `None`: not derived for this set.
#[derive(Debug)]
struct Truth {
    os: Option<f64>,
    or: f64,
    g0: Option<f64>,
    /// L_logp = RTT(0)/2 − g(0); `None` when not positive (unknown).
    l: Option<f64>,
}

fn truth(p: &LogGp, send: &str) -> Truth {
    let r = 2.0 * (p.os() + p.l() + p.or());
    let g0 = p.os().max(p.g()).max(p.or());
    let positive = |x: f64| (x > 0.0).then_some(x);
    if p.g() > r {
        return Truth {
            os: (send != "ssend").then_some(p.os()),
            or: p.or(),
            g0: (send != "ssend").then_some(p.g()),
            l: None,
        };
    }
    match send {
        "ssend" => Truth {
            os: Some(r),
            or: p.or(),
            g0: Some(r),
            l: positive((r + g0) / 2.0 - r),
        },
        _ => Truth {
            os: Some(p.os()),
            or: p.or(),
            g0: Some(g0),
            l: positive(r / 2.0 - g0),
        },
    }
}

/// Largest relative error seen per quantity, for the printed summary.
#[derive(Default)]
struct Worst {
    err: std::collections::BTreeMap<String, f64>,
    regimes: std::collections::BTreeMap<String, usize>,
}

impl Worst {
    fn note(&mut self, key: String, got: f64, want: f64) {
        let e = ((got - want) / want).abs();
        let w = self.err.entry(key).or_insert(0.0);
        *w = w.max(e);
    }
}

/// Check one mode pair on one parameter set.
fn check(p: &LogGp, send: &str, recv: &str, worst: &mut Worst) -> Result<(), String> {
    let doc = sim_json(
        "logp",
        p,
        2,
        &["--max-size", "0", "--send-mode", send, "--recv-mode", recv],
    );
    let rs = rows(&doc, "LogP parameters");
    let row = rs.iter().find(|r| r["size"] == 0).ok_or("no size-0 row")?;
    let t = truth(p, send);
    let mode = format!("{send}/{recv}");
    let r = 2.0 * (p.os() + p.l() + p.or());
    let regime = match (p.g() > r, t.l.is_some()) {
        (true, _) => "g > R",
        (false, true) => "L known",
        (false, false) => "L unknown",
    };
    *worst.regimes.entry(format!("{mode} {regime}")).or_insert(0) += 1;
    let mut errs = Vec::new();
    let mut cmp = |what: &str, got: f64, want: f64| {
        worst.note(format!("{mode} {what}"), got, want);
        if let Err(e) = close(&format!("{mode} {what}"), got, want, 0.02) {
            errs.push(e);
        }
    };
    if let Some(os) = t.os {
        cmp("os(0)", num(row, "os_ns"), os);
    }
    cmp("or(0)", num(row, "or_ns"), t.or);
    let g0 = num(&doc["summary"], "g0_ns");
    if let Some(want) = t.g0 {
        cmp("g(0)", g0, want);
        // The size-0 row reports the same g(0).
        cmp("row g(0)", num(row, "g_ns"), want);
    }
    match t.l {
        Some(l) => {
            cmp("L_logp", num(&doc["summary"], "L_ns"), l);
            cmp("row L_logp", num(row, "L_ns"), l);
            if row["valid"] != true {
                errs.push(format!("{mode}: a known L, yet the row is flagged: {row}"));
            }
        }
        None => {
            // Unknown, as logp_mpi: null with the reason, row flagged.
            let s = &doc["summary"];
            let ok = s["L_ns"].is_null()
                && s["L_reason"].is_string()
                && row["L_ns"].is_null()
                && row["L_reason"].is_string()
                && row["valid"] == false
                && row["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("L unknown"));
            if !ok {
                errs.push(format!(
                    "{mode}: L_logp should be unknown (RTT(0)/2 ≤ g(0)); summary {s}, row {row}"
                ));
            }
        }
    }
    none_failed(errs, "; ")
}

#[test]
fn every_mode_pair_recovers_os_or_g0_and_l_logp() {
    let worst = std::sync::Mutex::new(Worst::default());
    let count = std::sync::atomic::AtomicUsize::new(0);
    over_draws(
        "every_mode_pair_recovers_os_or_g0_and_l_logp",
        20,
        0x10_9b,
        |p| {
            let mut w = worst.lock().unwrap();
            let mut errs = Vec::new();
            for send in SENDS {
                for recv in RECVS {
                    count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if let Err(e) = check(p, send, recv, &mut w) {
                        errs.push(e);
                    }
                }
            }
            none_failed(errs, "\n    ")
        },
    );
    // The figures behind the claim (shown with --nocapture).
    println!(
        "{} runs; largest relative error against the closed form:",
        count.into_inner()
    );
    let w = worst.lock().unwrap();
    for (k, e) in &w.err {
        println!("  {k:<22} {:.4}%", 100.0 * e);
    }
    println!("parameter sets per case: {:?}", w.regimes);
}

#[test]
fn ssend_makes_l_unknown_and_says_why_with_the_defaults() {
    // The defaults (L 1 µs, o_s = o_r = 300 ns, g 500 ns): R = 3.2 µs,
    // G0 = 0.5 µs; ssend: RTT(0) = 3.7 µs, g(0) = 3.2 µs, L = −1.35 µs.
    let p = LogGp::DEFAULTS;
    let doc = sim_json("logp", &p, 2, &["--max-size", "0", "--send-mode", "ssend"]);
    let s = &doc["summary"];
    assert!(s["L_ns"].is_null(), "{s}");
    close("L_raw", num(s, "L_raw_ns"), 3700.0 / 2.0 - 3200.0, 1e-3).unwrap();
    close("RTT(0)", num(s, "rtt0_ns"), 3700.0, 1e-3).unwrap();
}
