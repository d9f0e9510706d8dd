//! What the closed-form tests share: the real binary run under
//! `--transport sim` (its JSON read back), and the LogGP parameter sets
//! they are checked over, drawn at random from a printed seed.
//!
//! The tests that use this module import nothing from the methods: the
//! truth they check against is written out in each test file from the
//! sim's rules (LogGP: L, o_s, o_r, g, G; polling progress, no jitter).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// One LogGP parameter set, in picoseconds (G in femtoseconds per byte).
#[derive(Clone, Copy, Debug)]
pub struct LogGp {
    pub l_ps: u64,
    pub os_ps: u64,
    pub or_ps: u64,
    pub g_ps: u64,
    pub big_g_fs: u64,
}

impl LogGp {
    /// The sim's defaults: L 1 µs, o_s = o_r = 300 ns, g 500 ns, G 0.1 ns/B.
    pub const DEFAULTS: LogGp = LogGp {
        l_ps: 1_000_000,
        os_ps: 300_000,
        or_ps: 300_000,
        g_ps: 500_000,
        big_g_fs: 100_000,
    };

    /// Nanoseconds, for the closed forms.
    pub fn l(&self) -> f64 {
        self.l_ps as f64 / 1000.0
    }
    pub fn os(&self) -> f64 {
        self.os_ps as f64 / 1000.0
    }
    pub fn or(&self) -> f64 {
        self.or_ps as f64 / 1000.0
    }
    pub fn g(&self) -> f64 {
        self.g_ps as f64 / 1000.0
    }
    /// Nanoseconds per byte.
    pub fn big_g(&self) -> f64 {
        self.big_g_fs as f64 / 1e6
    }

    /// The `--sim` argument: these parameters, polling progress, no jitter
    /// (G in ps with three decimals: the sim takes no fs unit).
    pub fn sim_arg(&self) -> String {
        format!(
            "L={}ps,os={}ps,or={}ps,g={}ps,G={}.{:03}ps/B,jitter=0ps,progress=poll",
            self.l_ps,
            self.os_ps,
            self.or_ps,
            self.g_ps,
            self.big_g_fs / 1000,
            self.big_g_fs % 1000
        )
    }
}

/// A small deterministic generator (splitmix64): the draws depend on the
/// seed alone, so a printed seed replays a failure exactly.
pub struct Draw(u64);

impl Draw {
    pub fn new(seed: u64) -> Draw {
        Draw(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi]`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// The ranges: L 0.2–5 µs, o_s and o_r 0.05–2 µs, g 0.1–3 µs
/// (below and above the overheads), G 0.01–1 ns/B.
pub fn draw(d: &mut Draw) -> LogGp {
    LogGp {
        l_ps: d.between(200_000, 5_000_000),
        os_ps: d.between(50_000, 2_000_000),
        or_ps: d.between(50_000, 2_000_000),
        g_ps: d.between(100_000, 3_000_000),
        big_g_fs: d.between(10_000, 1_000_000),
    }
}

/// The seed for this run: `OVB_SEED` if set, else `default`.
pub fn seed(default: u64) -> u64 {
    std::env::var("OVB_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Check `f` over `n` parameter sets drawn from `seed`; every failure is
/// collected and the test fails naming the seed, the set and the reason,
/// with the command line that replays it.
pub fn over_draws(
    test: &str,
    n: usize,
    default_seed: u64,
    f: impl Fn(&LogGp) -> Result<(), String>,
) {
    let s = seed(default_seed);
    let mut d = Draw::new(s);
    let mut failed = Vec::new();
    for k in 0..n {
        let p = draw(&mut d);
        if let Err(why) = f(&p) {
            failed.push(format!("  draw {k}: --sim {}: {why}", p.sim_arg()));
        }
    }
    assert!(
        failed.is_empty(),
        "{test}: {} of {n} parameter sets failed (seed {s}; replay with OVB_SEED={s} cargo test --test <file> {test}):\n{}",
        failed.len(),
        failed.join("\n")
    );
}

fn scratch(name: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "ovbench-truth-{}-{}-{name}.json",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Run `ovbench ARGS --json FILE` and return the JSON document; an exit
/// other than 0 fails with its stderr.
pub fn ovbench_json(args: &[&str]) -> serde_json::Value {
    ovbench_out(args).1
}

/// [`ovbench_json`], with what the run printed on stdout.
pub fn ovbench_out(args: &[&str]) -> (String, serde_json::Value) {
    let path = scratch(args.first().copied().unwrap_or("run"));
    let out = Command::new(env!("CARGO_BIN_EXE_ovbench"))
        .args(args)
        .arg("--json")
        .arg(&path)
        .output()
        .expect("start ovbench");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    std::fs::remove_file(&path).ok();
    assert!(
        out.status.success(),
        "ovbench {} exited {:?}:\n{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("JSON of ovbench {}: {e}", args.join(" ")));
    (String::from_utf8_lossy(&out.stdout).into_owned(), doc)
}

/// `ovbench CMD --transport sim --sim P ARGS`, its JSON.
pub fn sim_json(cmd: &str, p: &LogGp, np: u32, args: &[&str]) -> serde_json::Value {
    let sim = p.sim_arg();
    let np = np.to_string();
    let mut v = vec![cmd, "--transport", "sim", "--sim", &sim, "--np", &np];
    v.extend_from_slice(args);
    ovbench_json(&v)
}

/// The rows of the JSON's table whose title contains `title`.
pub fn rows<'a>(doc: &'a serde_json::Value, title: &str) -> Vec<&'a serde_json::Value> {
    doc["tables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["title"].as_str().is_some_and(|s| s.contains(title)))
        .flat_map(|t| t["rows"].as_array().into_iter().flatten())
        .collect()
}

/// A number from a JSON object, failing with the key and the object.
pub fn num(v: &serde_json::Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("`{key}` is not a number in {v}"))
}

/// `got` within `rel` of `want` (relative), or a message saying by how much not.
pub fn close(what: &str, got: f64, want: f64, rel: f64) -> Result<(), String> {
    if (got - want).abs() <= rel * want.abs() {
        Ok(())
    } else {
        Err(format!(
            "{what} = {got:.3} ns, closed form {want:.3} ns ({:+.2}%)",
            100.0 * (got - want) / want
        ))
    }
}

/// Ok where no check failed, else the failures joined by `sep`.
pub fn none_failed(why: Vec<String>, sep: &str) -> Result<(), String> {
    if why.is_empty() {
        Ok(())
    } else {
        Err(why.join(sep))
    }
}
