//! Building training corpora from loaded records: language-pair selection and the contamination filter.
