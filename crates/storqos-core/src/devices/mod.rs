//! Storage models implementing [`crate::Device`].

pub mod constant;

pub use constant::ConstantRate;
