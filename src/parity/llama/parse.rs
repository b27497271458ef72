//! Case strings as test-backend-ops prints them: `OP(key=value,...)`, where
//! a value is a number, a type name or a bracketed list of numbers.

use std::str::FromStr;

use super::Skip;
use crate::DType;

/// One case string taken apart; values are looked up by key.
pub struct CaseString<'a> {
    /// The whole string.
    pub text: &'a str,
    /// The op, as llama.cpp names it (`MUL_MAT`).
    pub op: &'a str,
    params: Vec<(&'a str, &'a str)>,
}

impl<'a> CaseString<'a> {
    /// Splits `OP(k=v,...)` at its top-level commas.
    pub fn parse(s: &'a str) -> Result<CaseString<'a>, String> {
        let (op, rest) = s.split_once('(').ok_or("no '(' after the op")?;
        let body = rest.strip_suffix(')').ok_or("no closing ')'")?;
        let mut params = Vec::new();
        let (mut depth, mut start) = (0usize, 0usize);
        for (i, c) in body.char_indices().chain([(body.len(), ',')]) {
            match c {
                '[' => depth += 1,
                ']' => depth = depth.checked_sub(1).ok_or("unbalanced ']'")?,
                ',' if depth == 0 => {
                    let item = &body[start..i];
                    let (k, v) = item
                        .split_once('=')
                        .ok_or_else(|| format!("'{item}' is not key=value"))?;
                    params.push((k, v));
                    start = i + 1;
                }
                _ => {}
            }
        }
        if op.is_empty() || depth != 0 {
            return Err("no op name or unbalanced '['".into());
        }
        Ok(CaseString {
            text: s,
            op,
            params,
        })
    }

    /// The raw value of `key`.
    pub fn raw(&self, key: &str) -> Result<&'a str, Skip> {
        self.params
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .ok_or_else(|| Skip::Malformed(format!("no '{key}'")))
    }

    /// The raw value of `key`, or `None` where this version prints no such key.
    pub fn maybe(&self, key: &str) -> Option<&'a str> {
        self.raw(key).ok()
    }

    /// A number.
    pub fn num<T: FromStr>(&self, key: &str) -> Result<T, Skip> {
        let v = self.raw(key)?;
        v.parse()
            .map_err(|_| Skip::Malformed(format!("{key}={v} is not a number")))
    }

    /// A 0/1 flag.
    pub fn flag(&self, key: &str) -> Result<bool, Skip> {
        match self.raw(key)? {
            "0" => Ok(false),
            "1" => Ok(true),
            v => Err(Skip::Malformed(format!("{key}={v} is not 0 or 1"))),
        }
    }

    /// A flag that must be off for wginfer to express the case.
    pub fn off(&self, key: &str, what: &str) -> Result<(), Skip> {
        match self.maybe(key) {
            None | Some("0") => Ok(()),
            Some(_) => Err(Skip::Unsupported(what.to_string())),
        }
    }

    /// A list `[a,b,...]` of exactly `N` numbers.
    pub fn dims<const N: usize>(&self, key: &str) -> Result<[usize; N], Skip> {
        let v = self.raw(key)?;
        let bad = || Skip::Malformed(format!("{key}={v} is not a list of {N} numbers"));
        let inner = v.strip_prefix('[').and_then(|v| v.strip_suffix(']'));
        let values: Vec<usize> = inner
            .ok_or_else(bad)?
            .split(',')
            .map(|x| x.parse().map_err(|_| bad()))
            .collect::<Result<_, _>>()?;
        values.try_into().map_err(|_| bad())
    }

    /// A tensor type; one wginfer does not have makes the case unsupported.
    pub fn dtype(&self, key: &str) -> Result<DType, Skip> {
        let v = self.raw(key)?;
        DType::ALL
            .into_iter()
            .find(|t| t.name() == v)
            .ok_or_else(|| Skip::Unsupported(format!("type {v}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_case_string_comes_apart_at_its_top_level_commas() {
        let s = CaseString::parse("MUL_MAT(type_a=q4_K,m=16,bs=[2,3],per=[0,2,1,3],o=1)").unwrap();
        assert_eq!(s.op, "MUL_MAT");
        assert_eq!(s.dtype("type_a").unwrap(), DType::Q4K);
        assert_eq!(s.num::<usize>("m").unwrap(), 16);
        assert_eq!(s.dims::<2>("bs").unwrap(), [2, 3]);
        assert_eq!(s.dims::<4>("per").unwrap(), [0, 2, 1, 3]);
        assert!(s.flag("o").unwrap());
        assert!(matches!(s.dims::<3>("bs"), Err(Skip::Malformed(_))));
        assert!(matches!(s.raw("k"), Err(Skip::Malformed(_))));
        assert!(matches!(
            CaseString::parse("X(type=mxfp4)").unwrap().dtype("type"),
            Err(Skip::Unsupported(_))
        ));
        for bad in ["NOPARENS", "X(a=1", "X(a=[1,2)", "X(a)", "(a=1)"] {
            assert!(CaseString::parse(bad).is_err(), "{bad}");
        }
    }
}
