//! The run loop.
