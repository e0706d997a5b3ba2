//! Running tesseract: script detection (OSD), recognition, and its version for the record.
//!
//! Recognition with every installed language at once is slow and wrong: on the corpus' English
//! scan, `eng` alone takes 1.3 s and `eng+kor+chi_sim+chi_tra+jpn+fra+deu+rus` 4.2 s, and on a
//! Korean page the eight-language run reads "TeX" as Cyrillic "ТЕХ". So with
//! [`Languages::Auto`] each image first goes through tesseract's orientation and script
//! detection (`--psm 0`, about 0.9 s a page), and recognition then loads only the languages
//! of that script ([`languages_for_script`]). When detection finds too little text to judge,
//! every configured language is used: such pages are short, so the slow path is cheap there.

use std::path::Path;
use std::sync::OnceLock;

use super::{Helper, Languages, OcrSettings};
use crate::extract::ExtractError;

/// The languages of `auto` (the packs scripts/install-deps.sh installs).
pub const DEFAULT_LANGUAGES: &[&str] = &[
    "eng", "kor", "chi_sim", "chi_tra", "jpn", "fra", "deu", "rus",
];

/// tesseract's language codes for a script named by its OSD, among `installed`.
pub fn languages_for_script(script: &str, installed: &[String]) -> Vec<String> {
    let wanted: &[&str] = match script {
        "Latin" => &["eng", "fra", "deu"],
        "Hangul" | "Korean" => &["kor", "eng"],
        "Han" => &["chi_sim", "chi_tra", "eng"],
        "Japanese" | "Katakana" | "Hiragana" => &["jpn", "eng"],
        "Cyrillic" => &["rus", "eng"],
        _ => &[],
    };
    // The first language is tesseract's primary one, so the script's own comes first.
    wanted
        .iter()
        .filter(|lang| installed.iter().any(|have| have == *lang))
        .map(|lang| (*lang).to_owned())
        .collect()
}

/// The `Script:` line of tesseract's OSD output.
pub fn parse_script(osd: &str) -> Option<&str> {
    osd.lines()
        .find_map(|line| line.strip_prefix("Script:"))
        .map(str::trim)
        .filter(|script| !script.is_empty())
}

/// The languages to recognise `image` with: fixed ones, or those of its detected script.
pub(super) async fn choose_languages(
    settings: &OcrSettings,
    helper: &Helper<'_>,
    image: &Path,
    dpi: Option<u32>,
) -> Result<Vec<String>, ExtractError> {
    let candidates = match &settings.languages {
        Languages::Fixed(fixed) => return Ok(fixed.clone()),
        Languages::Auto(candidates) => candidates,
    };
    let mut args = vec![
        image.display().to_string(),
        "-".into(),
        "--psm".into(),
        "0".into(),
    ];
    if let Some(dpi) = dpi {
        args.extend(["--dpi".into(), dpi.to_string()]);
    }
    // Detection that finds too few characters exits with an error; that only means "unsure".
    let osd = helper
        .run_lenient(&settings.tesseract, &args, 1 << 16)
        .await?;
    let chosen = parse_script(&String::from_utf8_lossy(&osd))
        .map(|script| languages_for_script(script, candidates))
        .unwrap_or_default();
    Ok(if chosen.is_empty() {
        candidates.clone()
    } else {
        chosen
    })
}

/// Recognises `image` (every page of it, for a multi-page TIFF) in `languages`; pages end
/// with form feeds, as tesseract's text output separates them.
pub(super) async fn recognise(
    settings: &OcrSettings,
    helper: &Helper<'_>,
    image: &Path,
    languages: &[String],
    dpi: Option<u32>,
) -> Result<String, ExtractError> {
    let mut args = vec![
        image.display().to_string(),
        "-".into(),
        "-l".into(),
        languages.join("+"),
    ];
    if let Some(dpi) = dpi {
        args.extend(["--dpi".into(), dpi.to_string()]);
    }
    let out = helper.run(&settings.tesseract, &args, 64 << 20).await?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// `tesseract 5.3.0`, the first line of `tesseract --version`, asked once per process.
pub(super) async fn version(settings: &OcrSettings) -> String {
    static VERSION: OnceLock<String> = OnceLock::new();
    if let Some(version) = VERSION.get() {
        return version.clone();
    }
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tokio::process::Command::new(&settings.tesseract)
            .arg("--version")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await;
    let found = match output {
        Ok(Ok(out)) => {
            // Older releases print the version on stderr.
            let text = if out.stdout.is_empty() {
                out.stderr
            } else {
                out.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .map(|line| line.trim().to_owned())
        }
        _ => None,
    };
    match found {
        Some(line) if line.starts_with("tesseract") => VERSION.get_or_init(|| line).clone(),
        _ => "tesseract".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<String> {
        DEFAULT_LANGUAGES.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn scripts_pick_their_languages_among_the_installed() {
        assert_eq!(languages_for_script("Hangul", &all()), vec!["kor", "eng"]);
        assert_eq!(
            languages_for_script("Latin", &all()),
            vec!["eng", "fra", "deu"]
        );
        let only_english = vec!["eng".to_owned()];
        assert_eq!(languages_for_script("Cyrillic", &only_english), vec!["eng"]);
        assert!(languages_for_script("Arabic", &all()).is_empty());
    }

    #[test]
    fn the_script_line_is_read_from_osd_output() {
        let osd = "Page number: 0\nOrientation in degrees: 0\nRotate: 0\n\
                   Orientation confidence: 28.43\nScript: Korean\nScript confidence: 0.31\n";
        assert_eq!(parse_script(osd), Some("Korean"));
        assert_eq!(parse_script("Too few characters. Skipping this page"), None);
    }
}
