//! Use cases: what a person or a service asks planrun to do, each taking
//! typed inputs and returning a typed outcome plus one [`ExitStatus`].
//!
//! The front ends (`cli`, `server`) parse their input, call one function
//! here and present its outcome; no front end wires the engine by hand.

mod exit_status;

pub use exit_status::ExitStatus;
