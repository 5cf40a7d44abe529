//! Integration tests against the real local control plane (see `scripts/kube-harness`). One test
//! binary with a module per area keeps linking cheap.

mod support;

mod crds;
mod harness;
mod server_side_apply;
