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


rule all:
    default_target: True
    input:
        all_outputs(),
