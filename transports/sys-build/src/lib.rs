//! What the build scripts of `ovbench-verbs-sys`, `ovbench-ucx-sys` and
//! `ovbench-ofi-sys` have in common: find the C library by pkg-config,
//! run bindgen over the crate's `wrapper.h`, and compile the C shims that
//! bindgen's `wrap_static_fns` emits for the headers' `static inline`
//! functions (the fabric libraries put most of their data path there).
//!
//! The generated `bindings.rs` wraps bindgen's output in a module that
//! carries the lint allowances generated C names need, so each `-sys`
//! crate's `lib.rs` only includes it and adds what bindgen cannot emit.
#![deny(missing_docs)]

use std::env;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// Finds `pkg` by pkg-config (at least `min_version` when given), or stops
/// the build with a message that names the package to install (`hint`).
pub fn probe(pkg: &str, min_version: Option<&str>, hint: &str) -> pkg_config::Library {
    let mut config = pkg_config::Config::new();
    if let Some(v) = min_version {
        config.atleast_version(v);
    }
    config.probe(pkg).unwrap_or_else(|e| {
        panic!("{pkg} was not found by pkg-config ({e}); {hint}, or set PKG_CONFIG_PATH")
    })
}

/// The bindings one `-sys` crate wants from its `wrapper.h`.
pub struct Bindings<'a> {
    /// Short name for the generated files and the shim library
    /// (`<name>_static_fns.c`, `libovbench_<name>_static_fns.a`).
    pub name: &'a str,
    /// The main header, named in the error when bindgen fails.
    pub header: &'a str,
    /// Regexes for bindgen's function, type and variable allowlists.
    pub functions: &'a [&'a str],
    /// See [`Bindings::functions`].
    pub types: &'a [&'a str],
    /// See [`Bindings::functions`].
    pub vars: &'a [&'a str],
    /// Derive `Debug` on the generated types as well as `Default`.
    pub derive_debug: bool,
}

/// The lints generated C names and bindgen's code trip, allowed on the
/// module that holds them rather than on each `-sys` crate.
const ALLOWS: &str = "#[allow(non_upper_case_globals, non_camel_case_types, non_snake_case, \
    dead_code, missing_docs, unsafe_op_in_unsafe_fn, clippy::all, \
    clippy::undocumented_unsafe_blocks, rustdoc::all)]";

impl Bindings<'_> {
    /// Generates `$OUT_DIR/bindings.rs` against the include paths of
    /// `libs` and compiles the static-inline shims into a static library
    /// that cargo links.
    pub fn generate(&self, libs: &[&pkg_config::Library]) {
        println!("cargo:rerun-if-changed=wrapper.h");
        println!("cargo:rerun-if-changed=build.rs");
        let includes: Vec<PathBuf> = libs
            .iter()
            .flat_map(|l| l.include_paths.iter().cloned())
            .collect();
        let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
        let shims = out.join(format!("{}_static_fns", self.name));

        let mut builder = bindgen::Builder::default()
            .header("wrapper.h")
            .prepend_enum_name(false)
            .derive_default(true)
            .derive_debug(self.derive_debug)
            .layout_tests(false)
            .wrap_static_fns(true)
            .wrap_static_fns_path(&shims)
            .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
        for f in self.functions {
            builder = builder.allowlist_function(f);
        }
        for t in self.types {
            builder = builder.allowlist_type(t);
        }
        for v in self.vars {
            builder = builder.allowlist_var(v);
        }
        for inc in &includes {
            builder = builder.clang_arg(format!("-I{}", inc.display()));
        }
        let bindings = builder.generate().unwrap_or_else(|e| {
            panic!(
                "bindgen failed on {} ({e}); is libclang-dev installed?",
                self.header
            )
        });
        let path = out.join("bindings.rs");
        let mut file = BufWriter::new(File::create(&path).expect("create bindings.rs"));
        writeln!(file, "{ALLOWS}\nmod generated {{").expect("write bindings.rs");
        bindings
            .write(Box::new(&mut file))
            .expect("write bindings.rs");
        writeln!(file, "}}\npub use generated::*;").expect("write bindings.rs");
        file.flush().expect("write bindings.rs");

        // A header whose allowed functions are all real symbols (PMIx's)
        // has no static inline functions to wrap: bindgen writes no shims.
        if !shims.with_extension("c").exists() {
            return;
        }
        // The shims are bindgen's code, not ours: their warnings are noise.
        let mut cc = cc::Build::new();
        cc.file(shims.with_extension("c"))
            .include(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
            .warnings(false);
        for inc in &includes {
            cc.include(inc);
        }
        cc.compile(&format!("ovbench_{}_static_fns", self.name));
    }
}
