//! Every input kept under `regressions/<target>/` (a crash the fuzzer
//! once found, or a case worth keeping) replayed through its target's
//! check on an ordinary build: a fixed crash stays fixed.

use std::fs;
use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("regressions")
        .join(target);
    let Ok(entries) = fs::read_dir(&dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries {
        let path = e.expect("directory entry").path();
        let input = fs::read(&path).expect("regression input");
        eprintln!("{target}: {}", path.display());
        check(&input);
        n += 1;
    }
    n
}

#[test]
fn kept_inputs_pass() {
    let n = replay("wire_header", ovbench_fuzz::wire_header)
        + replay("engine_intake", ovbench_fuzz::engine_intake)
        + replay("short_header", ovbench_fuzz::short_header)
        + replay("bootstrap_wire", ovbench_fuzz::bootstrap_wire)
        + replay("parsers", ovbench_fuzz::parsers)
        + replay("result_json", ovbench_fuzz::result_json);
    eprintln!("{n} kept inputs replayed");
}
