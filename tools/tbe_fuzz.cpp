// tbe-fuzz: a time-boxed fuzz campaign of the TBE forward (tools/fuzz/): random forward cases
// biased to the edges run through a backend and judged by tbe_judge (the enclosure oracle, warning
// counts and the repair against tbe::repair, FATAL errors against tbe::find_first_violation,
// InvalidArgument against tbe::validate, canaries past the output). A failing case is shrunk and
// saved as a case folder (tbe/io/case_file.h). See --help.
#include <exception>
#include <iostream>
#include <memory>

#include "fuzz/campaign.h"
#include "fuzz/command_line.h"
#include "fuzz/faulty_backend.h"
#include "tbe/backend.h"
#include "tbe/select_backend.h"

int main(int argc, char** argv) {
  using namespace tbe;
  const fuzz::CommandLine cl = fuzz::parse_command_line(argc, argv);
  if (!cl.options) {
    (cl.exit_code == 0 ? std::cout : std::cerr) << cl.text;
    return cl.exit_code;
  }
  const fuzz::CampaignOptions& options = *cl.options;
  if (options.list > 0) {
    fuzz::list_cases(options, std::cout);
    return 0;
  }
  std::unique_ptr<Backend> dev;
  try {
    if (options.backend == "cuda") dev = select_backend(BackendKind::Cuda);
    else if (options.backend == "cpu-faulty") dev = std::make_unique<fuzz::FaultyBackend>();
    else dev = make_reference_backend();
  } catch (const std::exception& e) {
    std::cerr << "tbe-fuzz: " << e.what() << " (use --backend cpu on a machine without a GPU)\n";
    return 3;
  }
  fuzz::Campaign campaign(options, *dev, options.backend == "cuda", std::cout);
  return campaign.run();
}
