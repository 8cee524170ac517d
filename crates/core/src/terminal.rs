//! Text for the terminal: strings that come from data (a result file's encoder name, a
//! sentence, a recipe name) may hold control characters; printed raw, an ESC or BEL would
//! drive the user's terminal (colour, cursor moves, window titles). Everything harness
//! prints that such a string can reach goes through [`terminal_safe`].

use std::borrow::Cow;

/// `text` with every control character except newline and tab written as a visible escape
/// (`\u{1b}`), unchanged (borrowed) when it has none.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let unsafe_char = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_sent() {
        assert!(matches!(terminal_safe("plain\ttext\n"), Cow::Borrowed(_)));
        assert_eq!(
            terminal_safe("enc\u{1b}]0;owned\u{7}\r\u{9b}x"),
            "enc\\u{1b}]0;owned\\u{7}\\u{d}\\u{9b}x"
        );
    }
}
