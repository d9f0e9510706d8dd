//! The libfabric objects, one module per resource, and the only code of
//! this crate that calls `ovbench-ofi-sys` (with [`crate::memory`], which
//! owns the memory the provider reads and writes).
//!
//! Each object owns its handle and closes it in `Drop`; a child keeps its
//! parent open through an `Arc` of the parent's inner handle, so libfabric's
//! order (fi_endpoint(3), fi_domain(3): endpoint, then the completion
//! queue, address vector and registrations bound to the domain, then the
//! domain, then the fabric) holds whatever order the owners drop them in.
//! Every call that hands the provider memory or a context takes it in a
//! form that stays valid until the provider is done with it (see
//! [`endpoint`]).

pub(crate) mod av;
pub(crate) mod cq;
pub(crate) mod domain;
pub(crate) mod endpoint;
pub(crate) mod fabric;
pub mod inventory;
pub(crate) mod mr;
mod owned;

pub(crate) use av::AddressVector;
pub(crate) use cq::CompletionQueue;
pub(crate) use domain::Domain;
pub(crate) use endpoint::{RdmEndpoint, Scratch};
pub(crate) use fabric::{Fabric, Info};
pub(crate) use mr::MemoryRegion;
