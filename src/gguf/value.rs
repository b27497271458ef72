//! GGUF metadata values and their 13 types.

use std::fmt;

use super::array::Array;

/// The type tag of a GGUF metadata value, with GGUF's numeric ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueType {
    /// `uint8` (id 0).
    U8,
    /// `int8` (id 1).
    I8,
    /// `uint16` (id 2).
    U16,
    /// `int16` (id 3).
    I16,
    /// `uint32` (id 4).
    U32,
    /// `int32` (id 5).
    I32,
    /// `float32` (id 6).
    F32,
    /// `bool` (id 7), one byte that is 0 or 1.
    Bool,
    /// `string` (id 8): u64 byte length, then UTF-8 bytes.
    String,
    /// `array` (id 9): u32 element type, u64 length, then the elements.
    Array,
    /// `uint64` (id 10).
    U64,
    /// `int64` (id 11).
    I64,
    /// `float64` (id 12).
    F64,
}

impl ValueType {
    /// Every value type, in id order.
    pub const ALL: [ValueType; 13] = [
        ValueType::U8,
        ValueType::I8,
        ValueType::U16,
        ValueType::I16,
        ValueType::U32,
        ValueType::I32,
        ValueType::F32,
        ValueType::Bool,
        ValueType::String,
        ValueType::Array,
        ValueType::U64,
        ValueType::I64,
        ValueType::F64,
    ];

    /// GGUF's id for the type.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// The type for a GGUF id, `None` for an unknown id.
    pub fn from_id(id: u32) -> Option<ValueType> {
        ValueType::ALL.get(usize::try_from(id).ok()?).copied()
    }

    /// The smallest number of bytes a value of this type takes in a file
    /// (an empty string or array still has its length field).
    pub const fn min_encoded_size(self) -> usize {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 | ValueType::String => 8,
            ValueType::Array => 12,
        }
    }

    /// A short name: `u8`, `i32`, `f32`, `bool`, `string`, `array`, ...
    pub const fn name(self) -> &'static str {
        match self {
            ValueType::U8 => "u8",
            ValueType::I8 => "i8",
            ValueType::U16 => "u16",
            ValueType::I16 => "i16",
            ValueType::U32 => "u32",
            ValueType::I32 => "i32",
            ValueType::F32 => "f32",
            ValueType::Bool => "bool",
            ValueType::String => "string",
            ValueType::Array => "array",
            ValueType::U64 => "u64",
            ValueType::I64 => "i64",
            ValueType::F64 => "f64",
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A GGUF metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `uint8`.
    U8(u8),
    /// `int8`.
    I8(i8),
    /// `uint16`.
    U16(u16),
    /// `int16`.
    I16(i16),
    /// `uint32`.
    U32(u32),
    /// `int32`.
    I32(i32),
    /// `float32`.
    F32(f32),
    /// `bool`.
    Bool(bool),
    /// `string` (always valid UTF-8: the reader rejects anything else).
    String(String),
    /// `array`: elements of one type, possibly arrays themselves.
    Array(Array),
    /// `uint64`.
    U64(u64),
    /// `int64`.
    I64(i64),
    /// `float64`.
    F64(f64),
}
impl Value {
    /// The value's type tag.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::Array(_) => ValueType::Array,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
        }
    }

    /// A description of the type for messages: `u32`, `string`,
    /// `array of string`, `array of array`.
    pub fn type_description(&self) -> String {
        match self {
            Value::Array(a) => format!("array of {}", a.elem_type()),
            v => v.value_type().name().to_string(),
        }
    }

    /// Any integer value, widened to `i128` (never loses information).
    pub fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            Value::U8(v) => v.into(),
            Value::I8(v) => v.into(),
            Value::U16(v) => v.into(),
            Value::I16(v) => v.into(),
            Value::U32(v) => v.into(),
            Value::I32(v) => v.into(),
            Value::U64(v) => v.into(),
            Value::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// Any integer value that fits `u32`.
    pub fn as_u32(&self) -> Option<u32> {
        self.as_i128().and_then(|v| u32::try_from(v).ok())
    }

    /// Any integer value that fits `u64`.
    pub fn as_u64(&self) -> Option<u64> {
        self.as_i128().and_then(|v| u64::try_from(v).ok())
    }

    /// Any integer value that fits `usize`.
    pub fn as_usize(&self) -> Option<usize> {
        self.as_i128().and_then(|v| usize::try_from(v).ok())
    }

    /// Any integer value that fits `i32`.
    pub fn as_i32(&self) -> Option<i32> {
        self.as_i128().and_then(|v| i32::try_from(v).ok())
    }

    /// Any integer value that fits `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        self.as_i128().and_then(|v| i64::try_from(v).ok())
    }

    /// An `f32` or `f64` value as `f32` (an `f64` is rounded).
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    /// An `f32` or `f64` value as `f64`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(v) => Some(v.into()),
            Value::F64(v) => Some(v),
            _ => None,
        }
    }

    /// A `bool` value.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// A `string` value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// An `array` value.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Scalars show plainly, strings quoted and escaped, arrays summarised (see
/// [`Array`]'s `Display`).
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::U8(v) => write!(f, "{v}"),
            Value::I8(v) => write!(f, "{v}"),
            Value::U16(v) => write!(f, "{v}"),
            Value::I16(v) => write!(f, "{v}"),
            Value::U32(v) => write!(f, "{v}"),
            Value::I32(v) => write!(f, "{v}"),
            Value::F32(v) => write!(f, "{v}"),
            Value::Bool(v) => write!(f, "{v}"),
            Value::String(s) => write!(f, "{s:?}"),
            Value::Array(a) => write!(f, "{a}"),
            Value::U64(v) => write!(f, "{v}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
        }
    }
}

macro_rules! from_impls {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Value {
                Value::$variant(v)
            }
        }
        impl From<Vec<$t>> for Value {
            fn from(v: Vec<$t>) -> Value {
                Value::Array(Array::$variant(v))
            }
        }
    )*};
}

from_impls!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, String => String, u64 => U64, i64 => I64, f64 => F64,
);

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::String(v.to_string())
    }
}

impl From<Vec<&str>> for Value {
    fn from(v: Vec<&str>) -> Value {
        Value::Array(Array::String(v.into_iter().map(String::from).collect()))
    }
}

impl From<Array> for Value {
    fn from(v: Array) -> Value {
        Value::Array(v)
    }
}

impl From<Vec<Array>> for Value {
    fn from(v: Vec<Array>) -> Value {
        Value::Array(Array::Array(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accessors_and_ids() {
        for (i, t) in ValueType::ALL.iter().enumerate() {
            assert_eq!(t.id() as usize, i);
            assert_eq!(ValueType::from_id(t.id()), Some(*t));
            assert_eq!(Array::empty(*t).elem_type(), *t);
        }
        assert_eq!(ValueType::from_id(13), None);
        assert_eq!(Value::I64(7).as_u32(), Some(7));
        assert_eq!(Value::I8(-1).as_u32(), None);
        assert_eq!(Value::U64(u64::MAX).as_u32(), None);
        assert_eq!(Value::U64(u64::MAX).as_i64(), None);
        assert_eq!(Value::F64(0.5).as_f32(), Some(0.5));
        assert_eq!(Value::U32(1).as_f32(), None);
        assert_eq!(Value::from("x").as_str(), Some("x"));
        let a = Value::from(vec!["a", "b", "c"]);
        assert_eq!(a.as_array().map(Array::len), Some(3));
        assert_eq!(a.type_description(), "array of string");
        let long = Value::from((0..100u32).collect::<Vec<_>>());
        assert_eq!(long.to_string(), "[u32; 100] [0, 1, 2, 3, 4, 5, 6, 7, ...]");
        let nested = Value::from(vec![
            Array::from(vec![1i8]),
            Array::from(vec!["q".to_string()]),
        ]);
        assert_eq!(
            nested.to_string(),
            "[array; 2] [[i8; 1] [1], [string; 1] [\"q\"]]"
        );
    }
}
