//! A list of protocols (`--proto native,eager,rdma-read,raw`): the run is
//! repeated for each protocol in turn, with the same transport, rank
//! count and options (each a job of its own: its ranks, header and
//! tables), then one side-by-side table with every protocol's figure and
//! its ratio to the first (the `compare` table). With `--json`, one file
//! holds it all: the side-by-side table, and under `protocols` each run's
//! whole document, which `plot` and `compare` read as one run each.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::usage;
use crate::cli::common::{ProtoArg, TransportKind};
use crate::cli::Cli;

/// Run `cli`'s command once per protocol of `cli.protos`; the exit code.
pub(super) fn run(cli: &Cli) -> Result<i32> {
    let protos = &cli.protos;
    check(cli).map_err(usage)?;
    // --json -: each protocol's run prints its tables on the stdout it
    // inherits, which is stderr from here on; the JSON alone goes to
    // the real stdout.
    let mut real_stdout = if crate::files::stdout::is_stdout(cli.common.json.as_deref()) {
        Some(crate::files::stdout::divert()?)
    } else {
        None
    };
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let dir = scratch_dir(cli.common.json.as_deref());
    let mut files: Vec<PathBuf> = Vec::new();
    for (i, p) in protos.iter().enumerate() {
        let file = dir.join(format!(
            ".ovbench-{}-{i}-{}.json",
            std::process::id(),
            p.name()
        ));
        let one = rewrite(&args, *p, &file);
        let sub = parse(&one).map_err(usage)?;
        super::preflight(&sub, sub.np())
            .map_err(|e| usage(anyhow::anyhow!("--proto {}: {e:#}", p.name())))?;
        files.push(file);
    }
    let mut code = 0;
    for (p, file) in protos.iter().zip(&files) {
        let one = rewrite(&args, *p, file);
        code = run_one(cli, &one)
            .with_context(|| format!("--proto {} (of --proto {})", p.name(), list_text(protos)))?;
        if code != 0 {
            break;
        }
    }
    let merged = if code == 0 {
        side_by_side(cli, &files, real_stdout.as_mut())
    } else {
        Ok(())
    };
    for f in &files {
        let _ = std::fs::remove_file(f);
    }
    merged.map(|()| code)
}

fn list_text(protos: &[ProtoArg]) -> String {
    protos
        .iter()
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(",")
}

/// What a list of protocols cannot do, found before anything runs.
fn check(cli: &Cli) -> Result<()> {
    let protos = &cli.protos;
    for (i, p) in protos.iter().enumerate() {
        if protos[..i].contains(p) {
            bail!(
                "--proto {}: {} is named twice: name each protocol once",
                list_text(protos),
                p.name()
            );
        }
    }
    if cli.common.csv.is_some() {
        bail!(
            "--csv with a list of protocols (--proto {}): the tables of several runs go into one --json file; drop --csv, or give one protocol",
            list_text(protos)
        );
    }
    if cli.common.transport != TransportKind::Sim && std::env::var_os("OVBENCH_RANK").is_none() {
        if let Ok(ovbench_launcher::Role::Rank(_)) = ovbench_launcher::detect(Some(cli.np())) {
            bail!(
                "--proto {}: a list of protocols runs from ovbench's own launcher (or --transport sim); under srun or mpirun start one job per protocol and compare them with `ovbench compare`",
                list_text(protos)
            );
        }
    }
    Ok(())
}

/// Where the per-protocol files go while the runs last: beside the
/// --json file, else the temporary directory.
fn scratch_dir(json: Option<&Path>) -> PathBuf {
    json.and_then(Path::parent)
        .filter(|d| !d.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir)
}

/// The command line of one protocol's run: `--proto P` and `--json FILE`
/// in place of the list and the user's file.
fn rewrite(args: &[OsString], proto: ProtoArg, file: &Path) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    let mut it = args.iter();
    let mut had_json = false;
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        let (flag, inline) = match s.split_once('=') {
            Some((f, _)) if f.starts_with("--") => (f.to_string(), true),
            _ => (s.to_string(), false),
        };
        let value = match flag.as_str() {
            "--proto" => OsString::from(proto.name()),
            "--json" => {
                had_json = true;
                file.as_os_str().to_owned()
            }
            _ => {
                out.push(a.clone());
                continue;
            }
        };
        if !inline {
            it.next();
        }
        out.push(OsString::from(flag));
        out.push(value);
    }
    if !had_json {
        out.push("--json".into());
        out.push(file.as_os_str().to_owned());
    }
    out
}

/// Parse a rewritten command line as `main` would.
fn parse(args: &[OsString]) -> Result<Cli> {
    let argv = std::iter::once(OsStr::new("ovbench").to_owned()).chain(args.iter().cloned());
    let m = Cli::command_checked()
        .try_get_matches_from(argv)
        .map_err(|e| anyhow::anyhow!("{}", e.to_string().trim()))?;
    Cli::from_matches(&m).map_err(|e| anyhow::anyhow!("{e}"))
}

/// One protocol's run: in this process under sim, else ranks of its own.
fn run_one(cli: &Cli, args: &[OsString]) -> Result<i32> {
    #[cfg(feature = "sim")]
    if cli.common.transport == TransportKind::Sim {
        let sub = parse(args)?;
        return super::sim::run(&sub).map(|()| 0);
    }
    let opts = ovbench_launcher::LaunchOptions {
        timeout: cli.common.timeout.0,
        progress_threads: u32::from(cli.common.progress == ovbench_core::Progress::Thread),
        on_killed: super::ON_KILLED,
        ..ovbench_launcher::LaunchOptions::default()
    };
    ovbench_launcher::launch_local(cli.np(), args, &opts)
}

/// Print the side-by-side table and write the one JSON file.
fn side_by_side(cli: &Cli, files: &[PathBuf], stdout: Option<&mut std::fs::File>) -> Result<()> {
    let runs = crate::plot::load::read_all(files)?;
    let mut cmp = crate::compare::compare(&runs)?;
    // The per-protocol files are gone after this: name the runs instead.
    cmp.files = cli
        .protos
        .iter()
        .map(|p| format!("--proto {}", p.name()))
        .collect();
    println!("#");
    println!("# side by side: --proto {}", list_text(&cli.protos));
    for l in cmp.lines() {
        println!("{l}");
    }
    let Some(out) = &cli.common.json else {
        return Ok(());
    };
    let docs: Vec<Value> = files
        .iter()
        .map(|f| crate::files::input::read_json("", f))
        .collect::<Result<_>>()?;
    let rows: Vec<Value> = cmp
        .rows
        .iter()
        .filter_map(|(key, es)| {
            let base = es[0].as_ref()?;
            let verdict = |i: usize, e: &crate::compare::Entry| {
                if i == 0 {
                    "baseline".to_string()
                } else {
                    crate::compare::verdict(base, e).to_string()
                }
            };
            // null where a protocol has no such row (raw skips some sizes)
            Some(json!({
                "key": key,
                "values": es.iter().map(|e| e.as_ref().map(|e| e.value)).collect::<Vec<_>>(),
                "ratios": es.iter().map(|e| e.as_ref().map(|e| e.value / base.value)).collect::<Vec<_>>(),
                "verdicts": es.iter().enumerate().map(|(i, e)| e.as_ref().map(|e| verdict(i, e))).collect::<Vec<_>>(),
            }))
        })
        .collect();
    let doc = json!({
        "schema": crate::export::SCHEMA,
        "header": docs[0]["header"].clone(),
        "tables": [{
            "title": format!("side by side: {} of --proto {}, ratios to {}", cmp.metric.head, list_text(&cli.protos), cli.protos[0].name()),
            "columns": ["key", "values", "ratios", "verdicts"],
            "rows": rows,
        }],
        "summary": {},
        "notes": [],
        "protocols": docs,
        "complete": true,
    });
    let text = serde_json::to_string_pretty(&doc)?;
    match stdout {
        Some(real) => crate::files::stdout::write_json(real, &text),
        None => crate::files::output::write_atomic("--json", out, &(text + "\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn each_run_gets_its_protocol_and_file() {
        let f = Path::new("/tmp/x.json");
        assert_eq!(
            rewrite(
                &os(&["latency", "--proto", "native,eager", "--sizes", "8"]),
                ProtoArg::Eager,
                f
            ),
            os(&[
                "latency",
                "--proto",
                "eager",
                "--sizes",
                "8",
                "--json",
                "/tmp/x.json"
            ])
        );
        assert_eq!(
            rewrite(
                &os(&["--proto=raw,auto", "bw", "--json", "out.json"]),
                ProtoArg::Auto,
                f
            ),
            os(&["--proto", "auto", "bw", "--json", "/tmp/x.json"])
        );
    }
}
