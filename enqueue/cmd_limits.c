#include "cli.h"
int llmq_cmd_limits(struct llmq_cli *cli, int argc, char **argv)
{
    (void)cli; (void)argc; (void)argv;
    return LLMQ_EXIT_USAGE;
}
