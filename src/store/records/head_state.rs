//! A run state as a head line's checkpoint, serialized straight from the
//! [`RunState`]: its fields in order without the ones naming the head line
//! itself (`audit_seq`, `audit_hash`), then the store's links (`plan_hash`,
//! `history_hash`). These are the bytes the checkpoint built as a map
//! ([`linked_payload`](super::head::linked_payload) then
//! [`head_state`](super::head::head_state)) is written as, without building
//! that map at every step (`head.rs` tests that the two agree).

use serde::Serialize;
use serde::ser::{Error as _, Impossible, SerializeMap, SerializeStruct, Serializer};

use crate::store::RunState;
use crate::store::records::head::{LINK_FIELDS, Links, SELF_FIELDS};

/// The checkpoint of `state` with the store's `links`, as a head line
/// carries it.
#[derive(Clone, Copy)]
pub(crate) struct HeadState<'a> {
    pub state: &'a RunState,
    pub links: Links<'a>,
}

impl Serialize for HeadState<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.state.serialize(Fields { inner: serializer, links: self.links })
    }
}

/// Why anything but a struct is refused: a run state is a struct.
const NOT_A_STRUCT: &str = "a run state serializes as a struct";

/// A serializer that takes the run state's struct and writes it as a map
/// through `inner`, leaving out [`SELF_FIELDS`] and ending with the links.
struct Fields<'a, S> {
    inner: S,
    links: Links<'a>,
}

/// The entries of the map [`Fields`] writes.
struct Entries<'a, M> {
    map: M,
    links: Links<'a>,
}

impl<M: SerializeMap> SerializeStruct for Entries<'_, M> {
    type Ok = M::Ok;
    type Error = M::Error;

    fn serialize_field<T: ?Sized + Serialize>(&mut self, key: &'static str, value: &T) -> Result<(), M::Error> {
        if SELF_FIELDS.contains(&key) {
            return Ok(());
        }
        self.map.serialize_entry(key, value)
    }

    fn end(mut self) -> Result<M::Ok, M::Error> {
        self.map.serialize_entry(LINK_FIELDS[0], self.links.plan_hash)?;
        self.map.serialize_entry(LINK_FIELDS[1], &self.links.history_hash)?;
        self.map.end()
    }
}

/// The [`Serializer`] methods of [`Fields`] for what a run state is not.
macro_rules! refuse {
    ($($method:ident($($argument:ty),*) -> $output:ty;)*) => {
        $(fn $method(self, $(_: $argument),*) -> Result<$output, S::Error> {
            Err(S::Error::custom(NOT_A_STRUCT))
        })*
    };
}

impl<'a, S: Serializer> Serializer for Fields<'a, S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Impossible<S::Ok, S::Error>;
    type SerializeTuple = Impossible<S::Ok, S::Error>;
    type SerializeTupleStruct = Impossible<S::Ok, S::Error>;
    type SerializeTupleVariant = Impossible<S::Ok, S::Error>;
    type SerializeMap = Impossible<S::Ok, S::Error>;
    type SerializeStruct = Entries<'a, S::SerializeMap>;
    type SerializeStructVariant = Impossible<S::Ok, S::Error>;

    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self::SerializeStruct, S::Error> {
        Ok(Entries { map: self.inner.serialize_map(None)?, links: self.links })
    }

    refuse! {
        serialize_bool(bool) -> S::Ok;
        serialize_i8(i8) -> S::Ok;
        serialize_i16(i16) -> S::Ok;
        serialize_i32(i32) -> S::Ok;
        serialize_i64(i64) -> S::Ok;
        serialize_u8(u8) -> S::Ok;
        serialize_u16(u16) -> S::Ok;
        serialize_u32(u32) -> S::Ok;
        serialize_u64(u64) -> S::Ok;
        serialize_f32(f32) -> S::Ok;
        serialize_f64(f64) -> S::Ok;
        serialize_char(char) -> S::Ok;
        serialize_str(&str) -> S::Ok;
        serialize_bytes(&[u8]) -> S::Ok;
        serialize_none() -> S::Ok;
        serialize_unit() -> S::Ok;
        serialize_unit_struct(&'static str) -> S::Ok;
        serialize_unit_variant(&'static str, u32, &'static str) -> S::Ok;
        serialize_seq(Option<usize>) -> Self::SerializeSeq;
        serialize_tuple(usize) -> Self::SerializeTuple;
        serialize_tuple_struct(&'static str, usize) -> Self::SerializeTupleStruct;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Self::SerializeTupleVariant;
        serialize_map(Option<usize>) -> Self::SerializeMap;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Self::SerializeStructVariant;
    }

    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<S::Ok, S::Error> {
        Err(S::Error::custom(NOT_A_STRUCT))
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, _: &T) -> Result<S::Ok, S::Error> {
        Err(S::Error::custom(NOT_A_STRUCT))
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<S::Ok, S::Error> {
        Err(S::Error::custom(NOT_A_STRUCT))
    }
}
