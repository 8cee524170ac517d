//! RFC 4180 quoting for one physical line: a field that starts with `"` runs to the next
//! lone `"`, and `""` inside it is one `"`. Used by the formats written with CSV quoting
//! (SIB-200's pandas `to_csv(sep='\t')`, the MARC CSV files). None of them has a field
//! with a line break (their SOURCE.txt says so), so records never span lines, and a quote
//! left open at the end of a line is an error naming the file and line.
//!
//! Reference: RFC 4180 section 2 (and Python's `csv` module with its default dialect,
//! which is what wrote these files).

use crate::data::DataError;
use std::path::Path;

/// Splits one line into fields separated by `delim`, undoing RFC 4180 quoting, and checks
/// there are exactly `expected` fields.
pub fn split_line(
    path: &Path,
    line_no: usize,
    line: &str,
    delim: char,
    expected: usize,
) -> Result<Vec<String>, DataError> {
    let bad = |detail: String| {
        DataError::format(
            path,
            Some(line_no),
            detail,
            "the file is truncated or corrupt; re-fetch it with `harness datasets fetch --force`",
        )
    };
    let mut fields = Vec::with_capacity(expected);
    let mut chars = line.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => {
                        return Err(bad(format!(
                            "quoted field {} is not closed before the end of the line",
                            fields.len() + 1
                        )))
                    }
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    break;
                }
                Some(c) if c == delim => fields.push(field),
                Some(c) => {
                    return Err(bad(format!(
                        "unexpected `{c}` after the closing quote of field {}",
                        fields.len() + 1
                    )))
                }
            }
        } else {
            let mut ended = true;
            for c in chars.by_ref() {
                if c == delim {
                    ended = false;
                    break;
                }
                field.push(c);
            }
            fields.push(field);
            if ended {
                break;
            }
        }
    }
    if fields.len() != expected {
        let name = if delim == '\t' { "tab" } else { "comma" };
        return Err(bad(format!(
            "expected {expected} {name}-separated fields, found {}",
            fields.len()
        )));
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str, delim: char, n: usize) -> Result<Vec<String>, DataError> {
        split_line(Path::new("f.csv"), 3, line, delim, n)
    }

    #[test]
    fn plain_quoted_and_doubled_quotes() {
        assert_eq!(split("1,a b,5", ',', 3).unwrap(), vec!["1", "a b", "5"]);
        assert_eq!(
            split("1,\"x, \"\"y\"\"\",5", ',', 3).unwrap(),
            vec!["1", "x, \"y\"", "5"]
        );
        assert_eq!(
            split("997\thealth\t\"\"\"We\"\" he\"", '\t', 3).unwrap(),
            vec!["997", "health", "\"We\" he"]
        );
        assert_eq!(split("a,,", ',', 3).unwrap(), vec!["a", "", ""]);
        // A quote inside an unquoted field is literal.
        assert_eq!(split("a,b\"c,d", ',', 3).unwrap(), vec!["a", "b\"c", "d"]);
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        for line in ["1,\"open,5", "1,\"x\"y,5", "1,2", "1,2,3,4"] {
            let msg = split(line, ',', 3).unwrap_err().to_string();
            assert!(msg.contains("f.csv:3"), "{msg}");
        }
    }
}
