//! Record words with a fallback: a type whose known values are fixed words
//! (`KNOWN`, each spelled by `as_str`) and whose `Other(String)` keeps any
//! other word as written, so a record of another version reads and writes
//! back unchanged. [`open_words!`] gives such a type its conversions and
//! serde impls (a JSON string either way), once for all of them.

/// Implements `From<&str>`, `Display`, `Serialize` and `Deserialize` for
/// `$ty`, which has `const KNOWN: [$ty; N]`, `fn as_str(&self) -> &str`
/// and an `Other(String)` variant.
macro_rules! open_words {
    ($ty:ident) => {
        impl From<&str> for $ty {
            fn from(word: &str) -> Self {
                $ty::KNOWN
                    .into_iter()
                    .find(|known| known.as_str() == word)
                    .unwrap_or_else(|| $ty::Other(word.to_string()))
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                <String as serde::Deserialize>::deserialize(deserializer).map(|word| $ty::from(word.as_str()))
            }
        }
    };
}

pub(crate) use open_words;
