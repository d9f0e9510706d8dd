//! Generate the verbs and rdma_cm bindings from the system headers.
//!
//! The data-path entry points of libibverbs (`ibv_post_send`,
//! `ibv_poll_cq`, `ibv_post_recv`, `ibv_req_notify_cq`, `ibv_wr_*`, …) are
//! `static inline` in `verbs.h`; bindgen's `wrap_static_fns` emits a C file
//! with one exported shim per inline function, which `cc` compiles here so
//! they link like ordinary symbols.

use std::env;
use std::path::PathBuf;

fn main() {
    let missing = |lib: &str, pkg: &str, e: pkg_config::Error| -> ! {
        panic!(
            "{lib} was not found by pkg-config ({e}); install the development package: \
             apt-get install {pkg} (Debian/Ubuntu) or rdma-core-devel (RHEL/Fedora)"
        )
    };
    let verbs = pkg_config::Config::new()
        .probe("libibverbs")
        .unwrap_or_else(|e| missing("libibverbs", "libibverbs-dev", e));
    let cm = pkg_config::Config::new()
        .probe("librdmacm")
        .unwrap_or_else(|e| missing("librdmacm", "librdmacm-dev", e));

    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let shims = out.join("verbs_static_fns");
    let includes: Vec<PathBuf> = verbs
        .include_paths
        .iter()
        .chain(cm.include_paths.iter())
        .cloned()
        .collect();

    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function("_*ibv_.*|rdma_.*")
        .allowlist_type("_*ibv_.*|rdma_.*")
        .allowlist_var("IBV_.*|RDMA_.*")
        .derive_default(true)
        .derive_debug(true)
        .prepend_enum_name(false)
        .wrap_static_fns(true)
        .wrap_static_fns_path(&shims)
        .layout_tests(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for inc in &includes {
        builder = builder.clang_arg(format!("-I{}", inc.display()));
    }
    let bindings = builder
        .generate()
        .expect("bindgen failed on infiniband/verbs.h; is libclang-dev installed?");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("writing bindings.rs");

    let mut cc = cc::Build::new();
    cc.file(shims.with_extension("c"))
        .include(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"))
        .warnings(false);
    for inc in &includes {
        cc.include(inc);
    }
    cc.compile("ovbench_verbs_static_fns");
    println!("cargo:rerun-if-changed=wrapper.h");
    println!("cargo:rustc-env=OVBENCH_IBVERBS_VERSION={}", verbs.version);
    println!("cargo:rustc-env=OVBENCH_RDMACM_VERSION={}", cm.version);
}
