//! `write_file` and `read_file`. (Being implemented.)
pub fn read_file() {}
pub fn write_file() {}
