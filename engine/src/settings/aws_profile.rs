//! The shared AWS files (`~/.aws/credentials`, `~/.aws/config`) as the AWS
//! SDKs and CLI read them, for the profile of `AWS_PROFILE` (else
//! `default`): the static keys of its section, and its region. Profiles
//! that get their keys otherwise (SSO, `role_arn`, `credential_process`)
//! are not followed: their keys are the ones `aws configure
//! export-credentials` prints.

use std::path::PathBuf;

/// What one profile of the shared files says.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Profile {
    pub key_id: Option<String>,
    pub secret: Option<String>,
    pub session_token: Option<String>,
    pub region: Option<String>,
}

/// The profile `lookup`'s variables name, read from the files they name
/// (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE`, else under `HOME`).
/// A file missing or unreadable says nothing.
pub(super) fn profile(lookup: &impl Fn(&str) -> Option<String>) -> Profile {
    let var = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
    let name = var("AWS_PROFILE").or_else(|| var("AWS_DEFAULT_PROFILE")).unwrap_or_else(|| "default".into());
    let file = |variable: &str, under_home: &str| {
        let path =
            var(variable).map(PathBuf::from).or_else(|| var("HOME").map(|h| PathBuf::from(h).join(under_home)))?;
        std::fs::read_to_string(path).ok()
    };
    let credentials = file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials").unwrap_or_default();
    let config = file("AWS_CONFIG_FILE", ".aws/config").unwrap_or_default();
    // The config file names its sections `[profile NAME]`, but `[default]`.
    let config_section = if name == "default" { name.clone() } else { format!("profile {name}") };
    let from_credentials = |key: &str| value(&credentials, &name, key);
    let from_config = |key: &str| value(&config, &config_section, key);
    // Keys may be in either file; the credentials file's win, as the SDKs'.
    let either = |key: &str| from_credentials(key).or_else(|| from_config(key));
    Profile {
        key_id: either("aws_access_key_id"),
        secret: either("aws_secret_access_key"),
        session_token: either("aws_session_token"),
        region: from_config("region"),
    }
}

/// The value of `key` in `[section]` of an INI file (`key = value` lines,
/// `#` and `;` comments).
fn value(text: &str, section: &str, key: &str) -> Option<String> {
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.split_whitespace().collect::<Vec<_>>().join(" ") == section;
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            if k.trim() == key && !v.trim().is_empty() {
                return Some(v.trim().to_string());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_s_keys_come_from_either_file_and_its_region_from_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let credentials = dir.path().join("credentials");
        let config = dir.path().join("config");
        std::fs::write(
            &credentials,
            "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = default-secret\n\n# work\n[work]\naws_access_key_id=AKIDWORK\naws_secret_access_key = work/secret+key\naws_session_token = work-token\n",
        )
        .unwrap();
        std::fs::write(
            &config,
            "[default]\nregion = us-east-1\n[profile  work]\n; the work account\nregion = eu-west-3\n[profile config-only]\naws_access_key_id = AKIDCONFIG\naws_secret_access_key = config-secret\n[profile sso]\nsso_session = corp\n",
        )
        .unwrap();
        let with = |profile: Option<&'static str>| {
            let (credentials, config) = (credentials.clone(), config.clone());
            move |var: &str| match var {
                "AWS_SHARED_CREDENTIALS_FILE" => Some(credentials.display().to_string()),
                "AWS_CONFIG_FILE" => Some(config.display().to_string()),
                "AWS_PROFILE" => profile.map(str::to_string),
                _ => None,
            }
        };
        let work = profile(&with(Some("work")));
        assert_eq!(
            work,
            Profile {
                key_id: Some("AKIDWORK".into()),
                secret: Some("work/secret+key".into()),
                session_token: Some("work-token".into()),
                region: Some("eu-west-3".into()),
            }
        );
        let default = profile(&with(None));
        assert_eq!((default.key_id.as_deref(), default.region.as_deref()), (Some("AKIDDEFAULT"), Some("us-east-1")));
        assert_eq!(profile(&with(Some("config-only"))).key_id.as_deref(), Some("AKIDCONFIG"));
        assert_eq!(profile(&with(Some("sso"))), Profile::default(), "SSO is not followed");
        // Under HOME when no variable names the files; none there: nothing.
        let home = |var: &str| (var == "HOME").then(|| dir.path().join("nowhere").display().to_string());
        assert_eq!(profile(&home), Profile::default());
    }
}
