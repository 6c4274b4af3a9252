/* llmq prices (being built). */
#include "cli.h"

int llmq_cmd_prices(struct llmq_cli *cli, int argc, char **argv)
{
    (void)argc, (void)argv;
    llmq_cli_error(cli, "not built yet");
    return LLMQ_EXIT_USAGE;
}
