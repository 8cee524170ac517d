//! `harness embed --encoder ENC --input X.txt --out X.npy`: a sentence file through any
//! encoder (and the embedding cache) into an `.npy` matrix.

use clap::Args;
use harness_core::settings::Settings;
use harness_encoders::embed_file::{embed, EmbedOptions};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct EmbedArgs {
    /// Encoder spec: `hashed-ngrams[:dim=512,seed=1,buckets=20]`, `npy:PATH.npy`,
    /// `all-MiniLM-L6-v2`, `multilingual-e5-small[:passage]`, a training run directory
    /// (`runs/<dir>`: its best checkpoint), or a sentence-transformers model folder PATH
    #[arg(long, value_name = "ENC")]
    pub encoder: String,
    /// Sentences, one per line (UTF-8); row i of the output is line i
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// Output matrix (.npy, float32), written atomically
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Sentences handed to the encoder at once
    #[arg(long, default_value_t = 1024)]
    pub batch_size: usize,
    /// Neither read nor write the embedding cache
    #[arg(long)]
    pub no_cache: bool,
    /// Replace `--out` if it exists (harness cannot tell an earlier matrix of its own from
    /// someone else's file, so it never replaces one unasked)
    #[arg(long)]
    pub force: bool,
    /// Where model-based encoders compute: `cpu`, `cuda:N` (a build made with
    /// `--features cuda`) or `wgpu` (with `--features wgpu`)
    #[arg(long, default_value = "cpu")]
    pub device: String,
}

/// `harness embed`: runs [`embed`] and prints one summary line.
pub fn run(args: &EmbedArgs, settings: &Settings) -> anyhow::Result<std::process::ExitCode> {
    let device =
        harness_core::device::Device::parse_for_encoding(&args.device, &super::compiled())?;
    let s = super::on_device(device, None, || {
        Ok(embed(
            &args.encoder,
            &args.input,
            &args.out,
            settings,
            EmbedOptions {
                use_cache: !args.no_cache,
                batch_size: args.batch_size,
                force: args.force,
                device,
            },
        )?)
    })?;
    let cache = match s.cache {
        Some(c) => format!(
            "{} cache hits, {} misses ({} distinct sentences encoded)",
            c.hits, c.misses, c.encoded
        ),
        None => "cache not used".to_string(),
    };
    println!(
        "wrote {} ({} × {}) in {:.3}s: {cache}{}",
        args.out.display(),
        s.sentences,
        s.dim,
        s.seconds,
        s.kernel_shapes_tuned
            .map(super::train::tuned_note)
            .unwrap_or_default()
    );
    Ok(std::process::ExitCode::SUCCESS)
}
