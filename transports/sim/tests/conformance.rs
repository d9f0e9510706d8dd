//! The transport contract's conformance suite on free-running sim
//! endpoints, with one-sided operations offloaded and served by the
//! target's library calls.

use ovbench_core::Transport;
use ovbench_sim::{endpoints, SimParams};

fn make(params: &str, n: u32) -> Vec<Box<dyn Transport>> {
    let p = SimParams::parse(params).expect("valid parameters");
    endpoints(n, &p)
        .expect("endpoints")
        .into_iter()
        .map(|t| Box::new(t) as Box<dyn Transport>)
        .collect()
}

mod offloaded {
    fn make(n: u32) -> Vec<Box<dyn ovbench_core::Transport>> {
        super::make("", n)
    }
    ovbench_conformance::conformance_tests!(make, 3);
}

mod target_progress {
    fn make(n: u32) -> Vec<Box<dyn ovbench_core::Transport>> {
        super::make("offload=no,jitter=300ns,seed=3", n)
    }
    ovbench_conformance::conformance_tests!(make, 2);
}
