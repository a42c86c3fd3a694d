//! Run records.
