//! What goes wrong with a recipe: one [`Problem`] per offending key, with its file and line,
//! and the [`RecipeError`] that carries them all. Reading (`load.rs`) and checking
//! (`check.rs`) both report problems, so they sit below both.

use std::fmt;
use std::path::PathBuf;

/// One thing wrong with a recipe.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The file that holds the offending key (the recipe, or a `base:` file).
    pub file: PathBuf,
    /// 1-based line of the key, when the file spells it out.
    pub line: Option<usize>,
    /// Dotted key path in the resolved recipe (`model.encoder.layers`, `tasks[1].corpus`).
    pub key: String,
    /// What is wrong and what was expected.
    pub message: String,
    /// A likely intended name.
    pub suggestion: Option<String>,
    /// Where the value came from when not the file itself (`set by --set ...`).
    pub note: Option<String>,
}

impl Problem {
    /// A problem at `key` of `file` (`line` when the text spells the key out), with no
    /// suggestion and no note.
    pub fn new(
        file: PathBuf,
        line: Option<usize>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) -> Problem {
        Problem {
            file,
            line,
            key: key.into(),
            message: message.into(),
            suggestion: None,
            note: None,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.message)?;
        if let Some(s) = &self.suggestion {
            write!(f, " (did you mean `{s}`?)")?;
        }
        if let Some(n) = &self.note {
            write!(f, " [{n}]")?;
        }
        Ok(())
    }
}

/// Why a recipe could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    /// Every problem found, in file order.
    #[error("{}", render(problems))]
    Invalid { problems: Vec<Problem> },
    /// The benchmark registry or dataset lock compiled into the binary is broken.
    #[error("{0}")]
    Setup(String),
}

fn render(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(Problem::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

impl RecipeError {
    /// The problems (empty for a setup error).
    pub fn problems(&self) -> &[Problem] {
        match self {
            RecipeError::Invalid { problems } => problems,
            RecipeError::Setup(_) => &[],
        }
    }
}
