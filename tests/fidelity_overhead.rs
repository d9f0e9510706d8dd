//! `ovbench overhead` (Sandia SMB's mpi_overhead) under the LogGP sim,
//! against closed forms derived below from the sim's rules alone
//! (docs/architecture.md § The simulator): nothing here comes from src/methods.
//!
//! The sim's rules used: a post costs the poster o_s of CPU; its NIC
//! starts an injection no earlier than max(g, m·G) after its previous one
//! (g for the barrier's 0-byte messages); the last byte arrives L + m·G
//! after the injection starts; consuming an arrived message costs o_r,
//! charged inside a library call; an eager send is complete once posted;
//! `work(n)` is n ns. With two ranks the barrier is one exchange: each
//! side posts its message (o_s), then waits for the other's (o_r).
//!
//! Each loop iteration is then a max-plus recurrence of event times, and
//! its steady period is the largest mean weight over the cycles of its
//! event graph. Writing A for the measuring rank, B for its partner,
//! h = max(g, m·G) and RTT = 2(o_s + L + o_r) + m·G:
//!
//! Send (A: barrier, isend, work w, wait; B: irecv, barrier, wait):
//!   A's own loop         2·o_s + o_r + w
//!   A's NIC              g + h        (its barrier message and the data)
//!   round trip           RTT          (data to B, B's barrier message back)
//!   two-iteration cycles (3o_s + 2L + 3o_r + w)/2,
//!                        (3o_s + 2L + 2o_r + g + m·G + w)/2,
//!                        (2o_s + 2L + 3o_r + h)/2
//! Receive (A: irecv, barrier, work w, wait; B: barrier, send):
//!   A's own loop         o_s + 2·o_r + w
//!   B's NIC              g + h        (its barrier message and the data)
//!   B's own loop         2·o_s + o_r
//!   round trip           RTT
//!   two-iteration cycles (3o_s + 2L + 3o_r + w)/2,
//!                        (3o_s + 2L + 2o_r + g + m·G)/2,
//!                        (2o_s + 2L + 3o_r + h + w)/2
//! Work only (A: barrier, work w; B: barrier):
//!   max(o_s + o_r + w, g, o_s + o_r + L + w/2)
//!
//! Where the data outlasts the post (m·G ≥ g, and m·G > o_s + w for send,
//! m·G > o_s for receive), the sender's next barrier message leaves the
//! NIC as the data's last byte does and arrives with it. The receiver
//! consumes both in one call before it can answer, so the round trip pays
//! a second o_r: 2·o_s + 3·o_r + 2L + m·G. For receive, the timed loop's
//! first iteration finds that barrier message already consumed in the
//! warm-up, so n iterations take n·that − o_r.
//!
//! At small w the period is base_t = max(RTT, g + h): where g is large
//! the loop sees the NIC's gap between the two messages one side sends
//! per iteration, not the round trip. Once iter_t > 1.5·base_t, A's own
//! loop is the longest cycle in both loops (the others grow by w/2 per
//! iteration only), so overhead = iter_t − work_t = o_s for send and o_r
//! for receive, and availability = 1 − overhead/base_t.

mod sim_truth;

use sim_truth::{close, num, over_draws, rows, LogGp};

const SIZE: u64 = 8;
const ITERS: u64 = 60;

/// The closed forms above for one parameter set, in ns.
struct Model {
    os: f64,
    or: f64,
    l: f64,
    g: f64,
    /// m·G for the data message, rounded down to a picosecond as the sim
    /// keeps time.
    mg: f64,
    recv: bool,
    /// Iterations per timed loop (the receive transient is spread over them).
    iters: f64,
}

impl Model {
    fn new(p: &LogGp, recv: bool, iters: u64) -> Model {
        let mg_ps = (SIZE * p.big_g_fs) / 1000;
        Model {
            os: p.os(),
            or: p.or(),
            l: p.l(),
            g: p.g(),
            mg: mg_ps as f64 / 1000.0,
            recv,
            iters: iters as f64,
        }
    }

    fn h(&self) -> f64 {
        self.g.max(self.mg)
    }

    fn rtt(&self) -> f64 {
        2.0 * (self.os + self.l + self.or) + self.mg
    }

    /// iter_t of the messaging loop with `w` ns of work.
    fn iter_t(&self, w: f64) -> f64 {
        let (os, or, l, g, mg, h) = (self.os, self.or, self.l, self.g, self.mg, self.h());
        let both = [g + h, self.rtt(), (3.0 * os + 2.0 * l + 3.0 * or + w) / 2.0];
        let own = if self.recv {
            [
                os + 2.0 * or + w,
                2.0 * os + or,
                (3.0 * os + 2.0 * l + 2.0 * or + g + mg) / 2.0,
                (2.0 * os + 2.0 * l + 3.0 * or + h + w) / 2.0,
            ]
        } else {
            [
                2.0 * os + or + w,
                g,
                (3.0 * os + 2.0 * l + 2.0 * or + g + mg + w) / 2.0,
                (2.0 * os + 2.0 * l + 3.0 * or + h) / 2.0,
            ]
        };
        let period = both.into_iter().chain(own).fold(0.0, f64::max);
        if !self.paired_at(w) {
            return period;
        }
        if self.recv {
            period.max(self.paired()) - or / self.iters
        } else {
            period.max(self.paired())
        }
    }

    /// Whether the data outlasts the post at work `w`: the next barrier
    /// message arrives with the data and the answer waits for a second o_r.
    fn paired_at(&self, w: f64) -> bool {
        let post = if self.recv { self.os } else { self.os + w };
        self.mg >= self.g && post < self.mg
    }

    /// The round trip that pays the second o_r.
    fn paired(&self) -> f64 {
        2.0 * self.os + 3.0 * self.or + 2.0 * self.l + self.mg
    }

    /// work_t: the loop with barrier and work only.
    fn work_t(&self, w: f64) -> f64 {
        (self.os + self.or + w)
            .max(self.g)
            .max(self.os + self.or + self.l + w / 2.0)
    }

    /// base_t at small work: max(RTT, g + h), or the paired round trip
    /// where the data outlasts the post.
    fn base0(&self) -> f64 {
        let base = self.rtt().max(self.g + self.h());
        if self.paired_at(1.0) {
            base.max(self.paired())
        } else {
            base
        }
    }

    /// The paper's procedure on the closed-form iter_t: work doubles from
    /// 1; stop once iter_t > thresh·base_t; base_t is the mean of the
    /// samples below bthresh·base_t. Returns (work, base_t).
    fn procedure(&self, thresh: f64, bthresh: f64) -> (u64, f64) {
        let (mut sum, mut n, mut base) = (0.0, 0.0, self.iter_t(1.0));
        let mut w = 1u64;
        loop {
            let t = self.iter_t(w as f64);
            if t > thresh * base {
                return (w, base);
            }
            if t < bthresh * base {
                sum += t;
                n += 1.0;
                base = sum / n;
            }
            w *= 2;
        }
    }
}

/// The one row of `doc`'s result table.
fn result_row(doc: &serde_json::Value, recv: bool) -> &serde_json::Value {
    let title = if recv {
        "receive overhead"
    } else {
        "send overhead"
    };
    let r = rows(doc, title);
    assert_eq!(r.len(), 1, "one row in {title}: {doc}");
    r[0]
}

fn check(p: &LogGp, recv: bool) -> Result<(), String> {
    check_with(p, recv, ITERS)
}

fn check_with(p: &LogGp, recv: bool, iters: u64) -> Result<(), String> {
    let m = Model::new(p, recv, iters);
    let iters = iters.to_string();
    let mut args = vec!["--msgsize", "8", "--iterations", &iters, "--repeats", "2"];
    if recv {
        args.push("--recv");
    }
    let doc = sim_truth::sim_json("overhead", p, 2, &args);
    let row = result_row(&doc, recv);
    if row["valid"] != true {
        return Err(format!("row flagged: {row}"));
    }
    let truth = if recv { m.or } else { m.os };
    let (w, base) = m.procedure(1.5, 1.02);
    // Overhead: a difference of two loops of several µs each, exact in
    // steady state; 0.5% of it or 1 ps per iteration's rounding.
    let ovh = num(row, "overhead_ns");
    if (ovh - truth).abs() > (0.005 * truth).max(0.002) {
        return Err(format!(
            "overhead = {ovh:.3} ns, closed form {} = {truth:.3} ns",
            if recv { "o_r" } else { "o_s" }
        ));
    }
    // Exact in steady state; near the knee the loop settles slowly.
    close("base_t", num(row, "base_ns"), base, 0.001)?;
    // Where the data outlasts the post, iter_t falls to the round trip
    // once o_s + w passes m·G, and those samples join base_t's mean.
    if !m.paired_at(1.0) {
        close("base_t (small work)", num(row, "base_ns"), m.base0(), 0.025)?;
    }
    close("iter_t", num(row, "iter_ns"), m.iter_t(w as f64), 0.002)?;
    close("work_t", num(row, "work_ns"), m.work_t(w as f64), 0.002)?;
    let avail = 100.0 * (1.0 - truth / base);
    let got = num(row, "avail_pct");
    if (got - avail).abs() > 0.2 {
        return Err(format!(
            "availability = {got:.2}%, closed form 1 - overhead/base_t = {avail:.2}%"
        ));
    }
    for run in row["runs"].as_array().into_iter().flatten() {
        if run["work"].as_u64() != Some(w) {
            return Err(format!("stopped at work {}, closed form {w}", run["work"]));
        }
    }
    Ok(())
}

#[test]
fn send_overhead_is_o_s_with_base_t_and_availability() {
    over_draws(
        "send_overhead_is_o_s_with_base_t_and_availability",
        20,
        13_06,
        |p| check(p, false),
    );
}

#[test]
fn recv_overhead_is_o_r_with_base_t_and_availability() {
    over_draws(
        "recv_overhead_is_o_r_with_base_t_and_availability",
        20,
        13_07,
        |p| check(p, true),
    );
}

/// Every --verbose row (work value: iter_t) of one repeat against iter_t(w).
fn check_steps(p: &LogGp, recv: bool, iters: u64) -> Result<(), String> {
    let m = Model::new(p, recv, iters);
    let iters = iters.to_string();
    let mut args = vec![
        "--msgsize",
        "8",
        "--iterations",
        &iters,
        "--repeats",
        "1",
        "--verbose",
    ];
    if recv {
        args.push("--recv");
    }
    let doc = sim_truth::sim_json("overhead", p, 2, &args);
    let steps = rows(&doc, "repeat 1/1");
    if steps.is_empty() {
        return Err("no --verbose rows".into());
    }
    for s in steps {
        let w = num(s, "work");
        close(
            &format!("recv {recv}: iter_t at work {w}"),
            num(s, "iter_ns"),
            m.iter_t(w),
            0.004,
        )?;
    }
    Ok(())
}

#[test]
fn every_work_value_follows_the_closed_form() {
    // The whole doubling curve, flat part and knee, in --verbose rows.
    over_draws("every_work_value_follows_the_closed_form", 6, 13_08, |p| {
        check_steps(p, false, ITERS)?;
        check_steps(p, true, ITERS)
    });
}

#[test]
fn nic_gap_sets_base_t_where_g_is_large() {
    // The draws above are mostly round-trip bound. Here each draw is
    // moved to the corner the ranges also hold — short wires,
    // cheap CPU, g of 2–3 µs — where the loop sees its NIC's gap between
    // the two messages one side sends per iteration: base_t = g + h.
    over_draws("nic_gap_sets_base_t_where_g_is_large", 8, 13_09, |p| {
        let q = LogGp {
            l_ps: 200_000 + p.l_ps / 20,
            os_ps: 50_000 + p.os_ps / 8,
            or_ps: 50_000 + p.or_ps / 8,
            g_ps: 2_000_000 + p.g_ps / 3,
            big_g_fs: p.big_g_fs,
        };
        let m = Model::new(&q, false, ITERS);
        if m.g + m.h() <= m.rtt() {
            return Err(format!("not a gap-bound set: {}", q.sim_arg()));
        }
        check(&q, false)?;
        check(&q, true)
    });
}

#[test]
fn a_message_longer_than_the_post_pays_a_second_receive() {
    // The drawn G keeps m·G at 8 B far below o_s. Here each draw's m·G
    // is moved above both g and o_s (and above o_s + w while w is small),
    // the corner where base_t is 2·o_s + 3·o_r + 2L + m·G, not the round
    // trip. More iterations keep the receive transient (o_r per loop)
    // inside the tolerance.
    over_draws(
        "a_message_longer_than_the_post_pays_a_second_receive",
        8,
        13_10,
        |p| {
            let mg_ps = p.g_ps.max(p.os_ps) + 300_000 + p.l_ps / 4;
            let q = LogGp {
                big_g_fs: mg_ps * 1000 / SIZE,
                ..*p
            };
            let m = Model::new(&q, false, 400);
            if (m.base0() - m.paired()).abs() > 1e-6 {
                return Err(format!("not a paired set: {}", q.sim_arg()));
            }
            let moved = |e: String| format!("moved to --sim {}: {e}", q.sim_arg());
            for recv in [false, true] {
                check_with(&q, recv, 400).map_err(moved)?;
                check_steps(&q, recv, 400).map_err(moved)?;
            }
            Ok(())
        },
    );
}

/// A figure no measurement can have: overhead below zero, availability
/// outside 0–100 % (the definitions, not the code's check).
fn impossible(run: &serde_json::Value) -> bool {
    let (o, a) = (num(run, "overhead_ns"), num(run, "avail_pct"));
    !(o >= 0.0 && (0.0..=100.0).contains(&a))
}

fn min_max(v: impl Iterator<Item = f64>) -> (f64, f64) {
    v.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    })
}

/// The repeat of median overhead: the middle one by overhead (the lower
/// middle for an even count; ties to the earlier repeat).
fn median_repeat(runs: &[serde_json::Value]) -> usize {
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&a, &b| {
        num(&runs[a], "overhead_ns")
            .total_cmp(&num(&runs[b], "overhead_ns"))
            .then(a.cmp(&b))
    });
    order[(runs.len() - 1) / 2]
}

#[test]
fn noisy_runs_report_the_median_repeat_and_range_and_flag_the_row() {
    // A large jitter on L makes whole measurements disagree, and some
    // impossible: the row's figures are one repeat's, the one of median
    // overhead, so they agree with each other (overhead = iter_t - work_t,
    // availability = 1 - overhead/base_t); its ranges are the repeats'
    // min and max; a row whose repeats' overheads are more than --thresh
    // apart is `noisy`, one that kept an impossible repeat INVALID, in
    // the table, in JSON and in a note.
    let (mut flagged, mut rejected, mut noisy) = (0, 0, 0);
    for seed in 1..=3 {
        let sim = format!("L=1us,jitter=30us,seed={seed}");
        let (stdout, doc) = sim_truth::ovbench_out(&[
            "overhead",
            "--transport",
            "sim",
            "--sim",
            &sim,
            "--iterations",
            "2",
            "--repeats",
            "5",
            "--sizes",
            "8,1K,4K",
        ]);
        let rows = rows(&doc, "send overhead");
        assert_eq!(rows.len(), 3);
        let lines: Vec<&str> = stdout
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .collect();
        assert_eq!(lines.len(), 3, "{stdout}");
        for (row, line) in rows.iter().zip(&lines) {
            let runs = row["runs"].as_array().expect("runs kept in JSON");
            assert_eq!(runs.len(), 5);
            let pick = median_repeat(runs);
            assert_eq!(row["median_repeat"], pick, "seed {seed}: {row}");
            for key in ["iter_ns", "work_ns", "overhead_ns", "base_ns", "avail_pct"] {
                assert_eq!(num(row, key), num(&runs[pick], key), "{key}: {row}");
            }
            let (iter, work, base) = (
                num(row, "iter_ns"),
                num(row, "work_ns"),
                num(row, "base_ns"),
            );
            let ovh = num(row, "overhead_ns");
            assert!(
                (ovh - (iter - work)).abs() <= 1e-9 * iter.abs().max(1.0),
                "{row}"
            );
            let avail = 100.0 * (1.0 - ovh / base);
            assert!((num(row, "avail_pct") - avail).abs() < 1e-9, "{row}");
            for (key, lo, hi) in [
                ("overhead_ns", "overhead_lo_ns", "overhead_hi_ns"),
                ("avail_pct", "avail_lo_pct", "avail_hi_pct"),
                ("base_ns", "base_lo_ns", "base_hi_ns"),
            ] {
                let range = min_max(runs.iter().map(|r| num(r, key)));
                assert_eq!(
                    (num(row, lo), num(row, hi)),
                    range,
                    "{key} of seed {seed}: {row}"
                );
            }
            assert_eq!(row["interval_level"], 0.9375);
            for r in row["rejected"].as_array().into_iter().flatten() {
                assert!(impossible(r), "a possible repeat was measured again: {r}");
                rejected += 1;
            }
            let bad = runs.iter().any(impossible);
            let (lo, hi) = min_max(runs.iter().map(|r| num(r, "overhead_ns")));
            // --thresh's default: 1.5.
            let apart = if lo > 0.0 { hi / lo > 1.5 } else { hi > lo };
            assert_eq!(row["valid"], !bad, "seed {seed}: {row}");
            let cell = line.split_whitespace().last();
            let size = &row["size"];
            if bad {
                flagged += 1;
                assert_eq!(
                    (cell, &row["flag"]),
                    (Some("INVALID"), &"INVALID".into()),
                    "{line}"
                );
                assert!(row["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("likely cause")));
                assert!(
                    stdout.contains(&format!("msgsize {size}: INVALID")),
                    "{stdout}"
                );
            } else if apart {
                noisy += 1;
                assert_eq!(
                    (cell, &row["flag"]),
                    (Some("noisy"), &"noisy".into()),
                    "{line}"
                );
                assert!(
                    stdout.contains(&format!("msgsize {size}: noisy:")),
                    "{stdout}"
                );
            } else {
                assert_eq!((cell, &row["flag"]), (Some("ok"), &"ok".into()), "{line}");
            }
            if lo > 0.0 {
                assert!((num(row, "spread_ratio") - hi / lo).abs() < 1e-9, "{row}");
            } else {
                assert!(row["spread_ratio"].is_null(), "{row}");
            }
        }
    }
    assert!(
        flagged > 0 && rejected > 0 && noisy > 0,
        "the seeds must exercise the flags ({flagged} INVALID, {rejected} rejected, {noisy} noisy)"
    );
}
