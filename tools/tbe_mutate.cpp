// tbe-mutate: the mutation harness (docs/mutation.md). See --help (mutate/mutate_args.cpp).
#include <exception>
#include <iostream>

#include "mutate/campaign.h"
#include "mutate/mutate_args.h"

int main(int argc, char** argv) {
  try {
    const tbe::cli::Parsed<tbe::mutate::MutateOptions> parsed =
        tbe::mutate::parse_mutate_args(argc, argv);
    if (const tbe::cli::Exit* exit = std::get_if<tbe::cli::Exit>(&parsed))
      return tbe::cli::finish(*exit);
    const tbe::mutate::MutateOptions& o = std::get<tbe::mutate::MutateOptions>(parsed);
    if (o.list) {
      tbe::mutate::print_catalogue(std::cout);
      return 0;
    }
    return tbe::mutate::run_campaign(o, std::cout, std::cerr);
  } catch (const std::exception& e) {
    std::cerr << "tbe-mutate: error: " << e.what() << "\n";
    return 3;
  }
}
