from snakemake.utils import min_version

min_version("9.27")


configfile: "config/config.yaml"


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/engines.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/prompts.smk"
include: "workflow/rules/protocol.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/archive.smk"


# On a cluster these run on the submitting machine: each is seconds of table or file work, where
# its own Slurm job would cost tens of seconds of submission and status polling (docs/slurm.md).
localrules:
    all,
    model_traffic,
    series_prompts,
    decide_look,
    aggregate_shots,
    compute_figures,
    check_claims,
    check_claims_against,
    claims_check,
    render_report,
    archive_run,


rule all:
    default_target: True
    input:
        all_outputs(),
