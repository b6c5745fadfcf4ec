// tbe-fuzz: a time-boxed fuzz campaign of the TBE forward, the backward + exact optimizer and the
// IKBO operators (tools/fuzz/): random cases biased to the edges run through a backend and judged
// by the enclosure oracles (and, for the forward, the warning counts and the repair against
// tbe::repair, FATAL errors against tbe::find_first_violation, InvalidArgument against
// tbe::validate, canaries past every output). A failing case is shrunk and saved as a case folder
// (tbe/io/*case_file.h). See --help.
#include <exception>
#include <iostream>
#include <memory>
#include <variant>
#include <vector>

#include "cli/host_allocator.h"
#include "fuzz/campaign.h"
#include "fuzz/command_line.h"
#include "fuzz/faulty_backend.h"
#include "tbe/backend.h"
#include "tbe/select_backend.h"
#if TBE_HAVE_CUDA
#endif

int main(int argc, char** argv) {
  using namespace tbe;
  cli::retain_freed_memory();
  const cli::Parsed<fuzz::CampaignOptions> parsed = fuzz::parse_command_line(argc, argv);
  if (const cli::Exit* exit = std::get_if<cli::Exit>(&parsed)) return cli::finish(*exit);
  const fuzz::CampaignOptions& options = std::get<fuzz::CampaignOptions>(parsed);
  if (options.list > 0) {
    fuzz::list_cases(options, std::cout);
    return 0;
  }
  std::unique_ptr<Backend> dev;
  std::vector<std::unique_ptr<ikbo::IkboBackend>> ikbo;
  try {
    if (options.backend == "cuda") {
      dev = select_backend(BackendKind::Cuda);
      // one IKBO backend per LCE stage: an IKBO case runs on the one its `stage` names
      ikbo = select_ikbo_backends(BackendKind::Cuda);
    } else if (options.backend == "cpu-faulty") {
      dev = std::make_unique<fuzz::FaultyBackend>();
      ikbo.push_back(std::make_unique<fuzz::FaultyIkboBackend>());
    } else {
      dev = make_reference_backend();
      ikbo.push_back(ikbo::make_reference_ikbo_backend());
    }
  } catch (const std::exception& e) {
    std::cerr << "tbe-fuzz: " << e.what() << " (use --backend cpu on a machine without a GPU)\n";
    return 3;
  }
  fuzz::Devices devices;
  devices.tbe = dev.get();
  for (const auto& b : ikbo) devices.ikbo.push_back(b.get());
  devices.gpu = options.backend == "cuda";
  fuzz::Campaign campaign(options, devices, std::cout);
  return campaign.run();
}
