//! Goal → plan routing.
