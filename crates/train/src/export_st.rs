//! `harness export` of a run whose encoder is a fine-tuned pretrained BERT: a
//! sentence-transformers folder that `SentenceTransformer(path)` loads and that gives the
//! run's vectors (tested through the repo's Python setup, `tests/st_export.rs`), and that
//! `--encoder PATH` reads back.
//!
//! Layout (sentence-transformers' own, as in all-MiniLM-L6-v2's folder):
//! - `modules.json`: Transformer (the folder itself) → `1_Pooling` → `2_Normalize`;
//! - `config.json`: the HF `BertModel` configuration the run was built from;
//! - `model.safetensors`: the weights under HF `BertModel` names (burn-store's
//!   `BurnToPyTorchAdapter` transposes the Linear weights and renames the LayerNorms back;
//!   `self_attention` → `self`, `layer_norm` → `LayerNorm`: the reverse of `load_bert`);
//! - `tokenizer.json` (HF `tokenizers`), `tokenizer_config.json`, `special_tokens_map.json`;
//! - `sentence_bert_config.json`: `max_seq_length` (the evaluation clip of a run);
//! - `config_sentence_transformers.json`: the model's prompt (e5's `query: `) as the
//!   default prompt, so `encode` prepends it as harness's tokenizer does;
//! - `1_Pooling/config.json`: the run's pooling.

use crate::TrainError;
use burn::backend::NdArray;
use burn::store::{BurnToPyTorchAdapter, ModuleSnapshot, SafetensorsStore};
use harness_core::outdir::{Foreign, OutDir};
use harness_data::pretrained_tokenizer::PretrainedTokenizer;
use harness_model::cpu::load_system;
use harness_model::encoder::bert_sentence::BertSentenceEncoder;
use harness_model::encoder::SentenceEncoder;
use harness_model::trained::{RunFiles, EVAL_MAX_LEN};
use std::path::Path;

/// The files this export writes.
pub const FILES: [&str; 9] = [
    "modules.json",
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
];

fn json_bytes(path: &Path, v: &serde_json::Value) -> Result<Vec<u8>, TrainError> {
    serde_json::to_vec_pretty(v).map_err(|e| TrainError::Export {
        path: path.to_path_buf(),
        detail: e.to_string(),
    })
}

/// Exports the BERT encoder of the run `files` into `out` (module doc).
pub fn export(files: &RunFiles, out: &Path, force: bool) -> Result<(), TrainError> {
    let will_write: Vec<String> = FILES.iter().map(|f| f.to_string()).collect();
    let mut dir = OutDir::claim(out, "export", &will_write, Foreign::RefuseDirectory, force)?;
    let (system, _config, tokenizer) = load_system(files)?;
    let SentenceEncoder::Bert(encoder) = system.encoder() else {
        return Err(TrainError::Export {
            path: files.checkpoint.clone(),
            detail: "the run's encoder is not a BERT".into(),
        });
    };
    let Some(pretrained) = tokenizer.pretrained() else {
        return Err(TrainError::Export {
            path: files.tokenizer.clone(),
            detail: "the run's tokenizer is not a pretrained model's; re-run `harness train`"
                .into(),
        });
    };
    write_tensors(files, encoder, &mut dir)?;

    let files_json = config_files(pretrained, encoder);
    for (name, value) in files_json {
        let bytes = json_bytes(&out.join(name), &value)?;
        dir.write(name, &bytes)?;
    }
    dir.finish()?;
    Ok(())
}

/// Writes the encoder's weights as `model.safetensors` (HF key names) into `dir`.
fn write_tensors(
    files: &RunFiles,
    encoder: &BertSentenceEncoder<NdArray<f32>>,
    dir: &mut OutDir,
) -> Result<(), TrainError> {
    let scratch = tempfile::tempdir().map_err(|e| TrainError::io(std::env::temp_dir(), e))?;
    let tensors = scratch.path().join("model.safetensors");
    let mut store = SafetensorsStore::from_file(&tensors)
        .with_to_adapter(BurnToPyTorchAdapter)
        .with_key_remapping(r"\.self_attention\.", ".self.")
        .with_key_remapping(r"layer_norm", "LayerNorm")
        .metadata("format", "pt")
        .metadata("harness_recipe", files.recipe.name.clone())
        .overwrite(true);
    if !encoder.bert.embeddings.word_blocks.is_empty() {
        return Err(TrainError::Export {
            path: tensors.clone(),
            detail: "the word table is in blocks (a device with small buffers); export on the CPU"
                .into(),
        });
    }
    encoder
        .bert
        .save_into(&mut store)
        .map_err(|e| TrainError::Export {
            path: tensors.clone(),
            detail: format!("writing safetensors: {e:?}"),
        })?;
    dir.copy("model.safetensors", &tensors)?;
    Ok(())
}

/// The folder's JSON files: sentence-transformers' modules, the BERT and tokenizer
/// configurations, pooling and prompts.
fn config_files(
    pretrained: &PretrainedTokenizer,
    encoder: &BertSentenceEncoder<NdArray<f32>>,
) -> [(&'static str, serde_json::Value); 8] {
    let mut config = pretrained.config.clone();
    if let Some(m) = config.as_object_mut() {
        m.insert("architectures".into(), serde_json::json!(["BertModel"]));
        m.insert("model_type".into(), "bert".into());
    }
    let hidden = encoder.bert.hidden_size;
    let pool = encoder.pool.name();
    let max_seq_length = (EVAL_MAX_LEN + 2).min(encoder.bert.max_position_embeddings);
    let mut tokenizer_config = serde_json::json!({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": max_seq_length,
        "clean_up_tokenization_spaces": false,
    });
    let mut special = serde_json::Map::new();
    for (key, token) in pretrained.special_tokens() {
        tokenizer_config[key] = token.clone().into();
        special.insert(key.into(), token.into());
    }
    let prefix = pretrained.prefix();
    let prompts = if prefix.is_empty() {
        serde_json::json!({"prompts": {}, "default_prompt_name": null})
    } else {
        serde_json::json!({"prompts": {"query": prefix}, "default_prompt_name": "query"})
    };
    let mut st_config = prompts;
    st_config["__version__"] = serde_json::json!({"harness": env!("CARGO_PKG_VERSION")});
    st_config["similarity_fn_name"] = "cosine".into();
    [
        (
            "modules.json",
            serde_json::json!([
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ]),
        ),
        ("config.json", config),
        ("tokenizer.json", pretrained.hf_json()),
        ("tokenizer_config.json", tokenizer_config),
        (
            "special_tokens_map.json",
            serde_json::Value::Object(special),
        ),
        (
            "sentence_bert_config.json",
            serde_json::json!({"max_seq_length": max_seq_length, "do_lower_case": false}),
        ),
        ("config_sentence_transformers.json", st_config),
        (
            "1_Pooling/config.json",
            serde_json::json!({
                "word_embedding_dimension": hidden,
                "pooling_mode_cls_token": pool == "cls",
                "pooling_mode_mean_tokens": pool == "mean",
                "pooling_mode_max_tokens": pool == "max",
                "pooling_mode_mean_sqrt_len_tokens": false,
                "pooling_mode_weightedmean_tokens": false,
                "pooling_mode_lasttoken": false,
                "include_prompt": true,
            }),
        ),
    ]
}
