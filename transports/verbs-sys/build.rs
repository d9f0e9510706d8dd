//! Generate the verbs and rdma_cm bindings from the system headers.
//!
//! The data-path entry points of libibverbs (`ibv_post_send`,
//! `ibv_poll_cq`, `ibv_post_recv`, `ibv_req_notify_cq`, `ibv_wr_*`, …) are
//! `static inline` in `verbs.h`; `ovbench-sys-build` compiles bindgen's
//! shims for them so they link like ordinary symbols.

fn main() {
    let hint = |pkg: &str| {
        format!("install the development package: apt-get install {pkg} (Debian/Ubuntu) or rdma-core-devel (RHEL/Fedora)")
    };
    let verbs = ovbench_sys_build::probe("libibverbs", None, &hint("libibverbs-dev"));
    let cm = ovbench_sys_build::probe("librdmacm", None, &hint("librdmacm-dev"));
    ovbench_sys_build::Bindings {
        name: "verbs",
        header: "infiniband/verbs.h",
        functions: &["_*ibv_.*|rdma_.*"],
        types: &["_*ibv_.*|rdma_.*"],
        vars: &["IBV_.*|RDMA_.*"],
        derive_debug: true,
    }
    .generate(&[&verbs, &cm]);
    println!("cargo:rustc-env=OVBENCH_IBVERBS_VERSION={}", verbs.version);
    println!("cargo:rustc-env=OVBENCH_RDMACM_VERSION={}", cm.version);
}
