//! Typed (possibly nested) GGUF arrays.

use std::fmt;

use super::value::{Value, ValueType};

/// A typed GGUF array. All elements have one type; an array of arrays holds
/// inner arrays that may each have a different element type.
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// Array of `uint8`.
    U8(Vec<u8>),
    /// Array of `int8`.
    I8(Vec<i8>),
    /// Array of `uint16`.
    U16(Vec<u16>),
    /// Array of `int16`.
    I16(Vec<i16>),
    /// Array of `uint32`.
    U32(Vec<u32>),
    /// Array of `int32`.
    I32(Vec<i32>),
    /// Array of `float32`.
    F32(Vec<f32>),
    /// Array of `bool`.
    Bool(Vec<bool>),
    /// Array of `string`.
    String(Vec<String>),
    /// Array of arrays.
    Array(Vec<Array>),
    /// Array of `uint64`.
    U64(Vec<u64>),
    /// Array of `int64`.
    I64(Vec<i64>),
    /// Array of `float64`.
    F64(Vec<f64>),
}
/// Calls `$body` with `$v` bound to the inner `Vec` of any array variant.
macro_rules! each_array {
    ($a:expr, $v:ident => $body:expr) => {
        match $a {
            Array::U8($v) => $body,
            Array::I8($v) => $body,
            Array::U16($v) => $body,
            Array::I16($v) => $body,
            Array::U32($v) => $body,
            Array::I32($v) => $body,
            Array::F32($v) => $body,
            Array::Bool($v) => $body,
            Array::String($v) => $body,
            Array::Array($v) => $body,
            Array::U64($v) => $body,
            Array::I64($v) => $body,
            Array::F64($v) => $body,
        }
    };
}

impl Array {
    /// The element type.
    pub fn elem_type(&self) -> ValueType {
        match self {
            Array::U8(_) => ValueType::U8,
            Array::I8(_) => ValueType::I8,
            Array::U16(_) => ValueType::U16,
            Array::I16(_) => ValueType::I16,
            Array::U32(_) => ValueType::U32,
            Array::I32(_) => ValueType::I32,
            Array::F32(_) => ValueType::F32,
            Array::Bool(_) => ValueType::Bool,
            Array::String(_) => ValueType::String,
            Array::Array(_) => ValueType::Array,
            Array::U64(_) => ValueType::U64,
            Array::I64(_) => ValueType::I64,
            Array::F64(_) => ValueType::F64,
        }
    }

    /// An empty array of the given element type.
    pub fn empty(elem_type: ValueType) -> Array {
        match elem_type {
            ValueType::U8 => Array::U8(Vec::new()),
            ValueType::I8 => Array::I8(Vec::new()),
            ValueType::U16 => Array::U16(Vec::new()),
            ValueType::I16 => Array::I16(Vec::new()),
            ValueType::U32 => Array::U32(Vec::new()),
            ValueType::I32 => Array::I32(Vec::new()),
            ValueType::F32 => Array::F32(Vec::new()),
            ValueType::Bool => Array::Bool(Vec::new()),
            ValueType::String => Array::String(Vec::new()),
            ValueType::Array => Array::Array(Vec::new()),
            ValueType::U64 => Array::U64(Vec::new()),
            ValueType::I64 => Array::I64(Vec::new()),
            ValueType::F64 => Array::F64(Vec::new()),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        each_array!(self, v => v.len())
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a [`Value`] (cloned), `None` past the end.
    pub fn get(&self, i: usize) -> Option<Value> {
        Some(match self {
            Array::U8(v) => Value::U8(*v.get(i)?),
            Array::I8(v) => Value::I8(*v.get(i)?),
            Array::U16(v) => Value::U16(*v.get(i)?),
            Array::I16(v) => Value::I16(*v.get(i)?),
            Array::U32(v) => Value::U32(*v.get(i)?),
            Array::I32(v) => Value::I32(*v.get(i)?),
            Array::F32(v) => Value::F32(*v.get(i)?),
            Array::Bool(v) => Value::Bool(*v.get(i)?),
            Array::String(v) => Value::String(v.get(i)?.clone()),
            Array::Array(v) => Value::Array(v.get(i)?.clone()),
            Array::U64(v) => Value::U64(*v.get(i)?),
            Array::I64(v) => Value::I64(*v.get(i)?),
            Array::F64(v) => Value::F64(*v.get(i)?),
        })
    }

    /// The elements of a string array.
    pub fn as_strs(&self) -> Option<&[String]> {
        match self {
            Array::String(v) => Some(v),
            _ => None,
        }
    }

    /// The elements of an `f32` array.
    pub fn as_f32s(&self) -> Option<&[f32]> {
        match self {
            Array::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The elements of an `i32` array.
    pub fn as_i32s(&self) -> Option<&[i32]> {
        match self {
            Array::I32(v) => Some(v),
            _ => None,
        }
    }

    /// The elements of a `u32` array.
    pub fn as_u32s(&self) -> Option<&[u32]> {
        match self {
            Array::U32(v) => Some(v),
            _ => None,
        }
    }

    /// The elements of an array of arrays.
    pub fn as_arrays(&self) -> Option<&[Array]> {
        match self {
            Array::Array(v) => Some(v),
            _ => None,
        }
    }

    /// The elements of any integer array widened to `i64`; `None` for other
    /// arrays or a `u64` element above `i64::MAX`.
    pub fn to_i64_vec(&self) -> Option<Vec<i64>> {
        fn conv<T: Copy + TryInto<i64>>(v: &[T]) -> Option<Vec<i64>> {
            v.iter().map(|&x| x.try_into().ok()).collect()
        }
        match self {
            Array::U8(v) => conv(v),
            Array::I8(v) => conv(v),
            Array::U16(v) => conv(v),
            Array::I16(v) => conv(v),
            Array::U32(v) => conv(v),
            Array::I32(v) => conv(v),
            Array::U64(v) => conv(v),
            Array::I64(v) => conv(v),
            _ => None,
        }
    }

    /// The elements of an `f32` or `f64` array as `f32`.
    pub fn to_f32_vec(&self) -> Option<Vec<f32>> {
        match self {
            Array::F32(v) => Some(v.clone()),
            Array::F64(v) => Some(v.iter().map(|&x| x as f32).collect()),
            _ => None,
        }
    }

    /// Writes at most `max_items` elements, then `...` if there are more.
    fn fmt_items(&self, f: &mut fmt::Formatter<'_>, max_items: usize) -> fmt::Result {
        f.write_str("[")?;
        let n = self.len().min(max_items);
        for i in 0..n {
            if i > 0 {
                f.write_str(", ")?;
            }
            match self {
                Array::Array(v) => {
                    if let Some(inner) = v.get(i) {
                        write!(f, "{inner}")?;
                    }
                }
                _ => {
                    if let Some(item) = self.get(i) {
                        write!(f, "{item}")?;
                    }
                }
            }
        }
        if self.len() > n {
            f.write_str(if n > 0 { ", ..." } else { "..." })?;
        }
        f.write_str("]")
    }
}

/// Arrays show as `[string; 49152] ["a", "b", ...]`: the element type, the
/// length and at most the first 8 elements.
impl fmt::Display for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}; {}] ", self.elem_type(), self.len())?;
        self.fmt_items(f, 8)
    }
}

macro_rules! from_vec_impls {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl From<Vec<$t>> for Array {
            fn from(v: Vec<$t>) -> Array {
                Array::$variant(v)
            }
        }
    )*};
}

from_vec_impls!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, String => String, u64 => U64, i64 => I64, f64 => F64,
);
