//! The contract's conformance suite, generic over [`crate::Transport`].
